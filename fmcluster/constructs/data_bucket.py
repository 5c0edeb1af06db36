"""The cluster's durable data tier: an S3 bucket (SSE-KMS, versioned, TLS only, access-logged) and its log bucket."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from fmcluster.constructs.retained_bucket import retained_bucket
from fmcluster.nag import acknowledge


@dataclass(frozen=True)
class BucketLifecycle:
    """One lifecycle rule (a plain mirror of the spec's, so the construct does not depend on the spec)."""

    prefix: str = ""
    noncurrent_version_expiration_days: Optional[int] = None
    expiration_days: Optional[int] = None
    intelligent_tiering_after_days: Optional[int] = None
    abort_incomplete_multipart_upload_days: Optional[int] = None


class DataBucket(Construct):
    """A new data bucket, or an existing one by name.

    New: SSE-KMS with `key` (S3 Bucket Keys on, so a linked file system's imports do not call KMS per object),
    versioning, public access blocked, TLS-only bucket policy, object ownership enforced,
    server access logs to a log bucket (SSE-S3: S3 log delivery cannot write SSE-KMS targets),
    both retained when the stack is deleted or the resource replaced.

    Existing: imported by name; nothing about it changes, and `key` is not applied.

    Exposes ``bucket``, ``bucket_name``, ``bucket_arn``, ``log_bucket`` (None when imported).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        key: kms.IKey,
        existing_name: Optional[str] = None,
        lifecycle: Sequence[BucketLifecycle] = (),
        access_log_retention_days: int = 365,
    ) -> None:
        super().__init__(scope, id)
        self.key: Optional[kms.IKey] = None if existing_name else key
        self.log_bucket: Optional[s3.Bucket] = None
        if existing_name:
            self.bucket: s3.IBucket = s3.Bucket.from_bucket_name(self, "Bucket", existing_name)
            return
        self.log_bucket = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=Duration.days(access_log_retention_days),
                    noncurrent_version_expiration=Duration.days(1),
                )
            ],
        )
        acknowledge(
            self.log_bucket,
            "AwsSolutions-S1",
            "This is the access-log target of the data bucket; logging it into itself would loop.",
        )
        self.bucket = retained_bucket(self, "Bucket", key=key, log_bucket=self.log_bucket, log_prefix="data-bucket/",
                                      lifecycle_rules=[_rule(r) for r in lifecycle])

    @property
    def bucket_name(self) -> str:
        return self.bucket.bucket_name

    @property
    def bucket_arn(self) -> str:
        return self.bucket.bucket_arn

    def grant_read_write(self, grantee: iam.IGrantable, *, write_prefixes: Sequence[str] = (),
                         delete_prefixes: Sequence[str] = ()) -> iam.Grant:
        """See `grant_data_access` (the key is granted only for a bucket created here)."""
        return grant_data_access(grantee, bucket_arn=self.bucket.bucket_arn, key_arn=self.key.key_arn if self.key else None,
                                 write_prefixes=write_prefixes, delete_prefixes=delete_prefixes)


def grant_data_access(grantee: iam.IGrantable, *, bucket_arn: str, key_arn: Optional[str],
                      write_prefixes: Sequence[str] = (), delete_prefixes: Sequence[str] = ()) -> iam.Grant:
    """Read every object and list the bucket; put objects (multipart uploads included) only under `write_prefixes`,
    delete them only under `delete_prefixes` (prefixes relative, ending in /); use the bucket's key. Every action is
    named (the L2 grant uses s3:GetObject*, s3:List* and kms:ReEncrypt*); none removes an object version."""
    grant = _named_grant(grantee, "DataBucketRead", ["s3:GetObject", "s3:GetObjectVersion"], [f"{bucket_arn}/*"])
    grant = grant.combine(_named_grant(grantee, "DataBucketListing",
                                       ["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
                                       [bucket_arn]))
    if write_prefixes:
        grant = grant.combine(_named_grant(grantee, "DataBucketWrite",
                                           ["s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:PutObject"],
                                           [f"{bucket_arn}/{p}*" for p in write_prefixes]))
    if delete_prefixes:
        grant = grant.combine(_named_grant(grantee, "DataBucketDelete", ["s3:DeleteObject"],
                                           [f"{bucket_arn}/{p}*" for p in delete_prefixes]))
    if key_arn is not None:
        grant = grant.combine(_named_grant(grantee, "DataBucketKey",
                                           ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"], [key_arn]))
    return grant


def _named_grant(grantee: iam.IGrantable, sid: str, actions: List[str], resources: List[str]) -> iam.Grant:
    """A grant whose statement carries a Sid (reviewers read policies by Sid)."""
    grant = iam.Grant.add_to_principal(grantee=grantee, actions=actions, resource_arns=resources)
    if grant.principal_statement is not None:
        grant.principal_statement.sid = sid
    return grant


def _rule(rule: BucketLifecycle) -> s3.LifecycleRule:
    def days(n: Optional[int]) -> Optional[Duration]:
        return Duration.days(n) if n is not None else None

    transitions = []
    if rule.intelligent_tiering_after_days is not None:
        transitions.append(
            s3.Transition(
                storage_class=s3.StorageClass.INTELLIGENT_TIERING,
                transition_after=Duration.days(rule.intelligent_tiering_after_days),
            )
        )
    return s3.LifecycleRule(
        prefix=rule.prefix or None,
        expiration=days(rule.expiration_days),
        noncurrent_version_expiration=days(rule.noncurrent_version_expiration_days),
        abort_incomplete_multipart_upload_after=days(rule.abort_incomplete_multipart_upload_days),
        transitions=transitions or None,
    )

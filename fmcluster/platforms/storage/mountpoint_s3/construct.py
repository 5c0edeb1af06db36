"""The bucket Mountpoint mounts when the storage stack creates it: a general purpose bucket (SSE-KMS with its own key,
versioned, TLS only, public access blocked, access-logged) or an S3 Express One Zone directory bucket in one AZ
(SSE-KMS, reached over HTTPS only). Both retained whatever happens to the stack."""

from __future__ import annotations

from typing import Optional

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3express as s3express
from constructs import Construct

from fmcluster.constructs.retained_bucket import retained_bucket
from fmcluster.nag import acknowledge


class MountBucket(Construct):
    """A general purpose bucket for Mountpoint.

    :param key: encrypts its objects (S3 Bucket Keys on, so reads and writes do not call KMS per object).
    :param log_bucket: receives its server access logs (the data bucket's log bucket, where there is one).

    Exposes ``bucket``, ``bucket_name``.
    """

    def __init__(self, scope: Construct, id: str, *, key: kms.IKey, log_bucket: Optional[s3.IBucket] = None) -> None:
        super().__init__(scope, id)
        # overwritten checkpoints and deleted objects stay as noncurrent versions: expire them, and the parts of
        # uploads a node never finished (Mountpoint aborts its own on failure; a lost node cannot)
        self.bucket = retained_bucket(
            self, "Bucket", key=key, log_bucket=log_bucket, log_prefix="mountpoint-bucket/",
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=Duration.days(30),
                                              abort_incomplete_multipart_upload_after=Duration.days(7))])
        if log_bucket is None:
            acknowledge(self.bucket, "AwsSolutions-S1", "The data bucket is an existing one, so there is no log "
                        "bucket of this stack to deliver access logs to; CloudTrail data events can log requests.")

    @property
    def bucket_name(self) -> str:
        return self.bucket.bucket_name


class MountDirectoryBucket(Construct):
    """An S3 Express One Zone directory bucket in the AZ `zone_id` (its name generated: base--<zone id>--x-s3).

    Directory buckets have no versioning, no access logs and no public access (S3 User Guide, "Directory buckets"),
    and answer HTTPS only, so no TLS policy is needed.

    Exposes ``resource``, ``bucket_name``, ``bucket_arn``.
    """

    def __init__(self, scope: Construct, id: str, *, zone_id: str, key: kms.IKey) -> None:
        super().__init__(scope, id)
        self.resource = s3express.CfnDirectoryBucket(
            self,
            "Resource",
            data_redundancy="SingleAvailabilityZone",
            location_name=zone_id,
            bucket_encryption=s3express.CfnDirectoryBucket.BucketEncryptionProperty(
                server_side_encryption_configuration=[
                    s3express.CfnDirectoryBucket.ServerSideEncryptionRuleProperty(
                        bucket_key_enabled=True,
                        server_side_encryption_by_default=s3express.CfnDirectoryBucket.ServerSideEncryptionByDefaultProperty(
                            sse_algorithm="aws:kms", kms_master_key_id=key.key_arn))]),
            lifecycle_configuration=s3express.CfnDirectoryBucket.LifecycleConfigurationProperty(rules=[
                s3express.CfnDirectoryBucket.RuleProperty(id="AbortIncompleteUploads", status="Enabled",
                                                          abort_incomplete_multipart_upload=s3express.CfnDirectoryBucket
                                                          .AbortIncompleteMultipartUploadProperty(
                                                              days_after_initiation=7))]),
        )
        self.resource.apply_removal_policy(RemovalPolicy.RETAIN)

    @property
    def bucket_name(self) -> str:
        return self.resource.ref

    @property
    def bucket_arn(self) -> str:
        return self.resource.attr_arn


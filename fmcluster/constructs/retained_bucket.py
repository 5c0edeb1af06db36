"""The one shape of a bucket that holds the user's data: KMS-encrypted with a bucket key, versioned, private,
TLS-only, owner-enforced, access-logged where the stack has a log bucket, and retained when its stack goes."""

from __future__ import annotations

from typing import Optional, Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


def retained_bucket(scope: Construct, id: str, *, key: kms.IKey, log_bucket: Optional[s3.IBucket], log_prefix: str,
                    lifecycle_rules: Sequence[s3.LifecycleRule] = ()) -> s3.Bucket:
    return s3.Bucket(
        scope,
        id,
        encryption=s3.BucketEncryption.KMS,
        encryption_key=key,
        bucket_key_enabled=True,
        versioned=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        server_access_logs_bucket=log_bucket,
        server_access_logs_prefix=log_prefix if log_bucket is not None else None,
        removal_policy=RemovalPolicy.RETAIN,
        lifecycle_rules=list(lifecycle_rules) or None,
    )

"""Mountpoint for Amazon S3 in the storage stack: the bucket it mounts where the spec names none (a general purpose
bucket, or an S3 Express One Zone directory bucket in the GPU AZ) with its own key, its outputs and exports.

Built directly in the storage stack (`StorageScope.scope`) with the stateful resources' logical ids pinned:
``MountpointKey``, ``MountpointBucket`` or ``MountpointDirectoryBucket``. Nothing here depends on compute, so no
compute change replaces them."""

from __future__ import annotations

from typing import Dict, Optional, Tuple, cast

from aws_cdk import CfnElement, CfnOutput, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from fmcluster.constructs.kms import ClusterKey
from fmcluster.constructs.logical_ids import pin_logical_id
from fmcluster.platforms.storage.forms import BuiltStore, StorageScope
from fmcluster.platforms.storage.mountpoint_s3.construct import MountBucket, MountDirectoryBucket
from fmcluster.platforms.storage.mountpoint_s3.mount import Bucket, Options, s3_mount
from fmcluster.platforms.storage.mountpoint_s3.settings import MountpointS3

KEY_ID = "MountpointKey"
BUCKET_ID = "MountpointBucket"
DIRECTORY_BUCKET_ID = "MountpointDirectoryBucket"


def build(where: StorageScope, settings: MountpointS3) -> BuiltStore:
    options = Options(
        mount_point=settings.mount_point, prefix=settings.prefix, read_only=settings.read_only,
        allow_overwrite=settings.allow_overwrite, allow_delete=settings.allow_delete, uid=settings.uid, gid=settings.gid,
        cache_directory=settings.cache_directory, max_cache_size_mib=settings.max_cache_size_mib,
        metadata_ttl_seconds=settings.metadata_ttl_seconds)
    here, there = _bucket(where, settings)
    local = s3_mount(here, options)  # the storage stack's own outputs name the bucket directly
    outputs: Dict[str, str] = {"MountpointSource": local.source, "MountpointMountCommand": local.command}
    return BuiltStore(mount=s3_mount(there, options), outputs=outputs)


def _bucket(where: StorageScope, settings: MountpointS3) -> Tuple[Bucket, Bucket]:
    """The bucket to mount: the spec's existing one (nothing created), or one created here with its own key; as the
    storage stack names it, and as the other stacks do: through exports with fixed names (so their policies' cdk-nag
    acknowledgments can name the bucket, and the exports never depend on the orchestrator)."""
    existing = settings.existing_bucket
    if existing is not None:
        bucket = Bucket(existing, directory=settings.express is not None, key_arn=settings.bucket_key_arn)
        return bucket, bucket
    stack = where.scope
    key = ClusterKey(stack, KEY_ID, description=f"{where.spec.name}: the bucket Mountpoint for Amazon S3 mounts")
    pin_logical_id(key.key, KEY_ID)
    if settings.express is not None:
        zone = settings.express.zone_id or _zone_id_of(where.subnet)
        directory = MountDirectoryBucket(stack, DIRECTORY_BUCKET_ID, zone_id=zone, key=key.key)
        pin_logical_id(directory.resource, DIRECTORY_BUCKET_ID)
        name = directory.bucket_name
    else:
        created = MountBucket(stack, BUCKET_ID, key=key.key, log_bucket=where.log_bucket)
        pin_logical_id(cast(CfnElement, created.bucket.node.default_child), BUCKET_ID)
        name = created.bucket_name
    directory_bucket, region = settings.express is not None, where.spec.region
    here = Bucket(name, directory=directory_bucket, key_arn=key.key_arn, region=region)
    there = Bucket(_export(stack, "MountpointBucketName", name), directory=directory_bucket,
                   key_arn=_export(stack, "MountpointKeyArn", key.key_arn), region=region)
    return here, there


def _export(scope: Construct, name: str, value: str) -> str:
    """Output `value` under a fixed export name; return its import for the other stacks."""
    export = f"{Stack.of(scope).stack_name}-{name}"
    CfnOutput(scope, name, value=value, export_name=export)
    return Fn.import_value(export)


def _zone_id_of(subnet: ec2.ISubnet) -> str:
    """The storage subnet's AZ id at deploy (a subnet this app creates; the spec asks for zone_id otherwise)."""
    resource: Optional[ec2.CfnSubnet] = subnet.node.default_child if isinstance(
        subnet.node.default_child, ec2.CfnSubnet) else None
    if resource is None:
        raise ValueError("storage.mountpoint_s3.express.zone_id: required where the storage subnet is not created "
                         "by this app (an existing VPC)")
    return resource.attr_availability_zone_id

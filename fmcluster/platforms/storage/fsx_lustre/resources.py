"""FSx for Lustre in the storage stack: the file system (EFA-enabled or behind its own security group), its data
repository associations, outputs and exports, and the data key's statement for FSx's service-linked role.

Built directly in the storage stack (`StorageScope.scope`) under the construct ids it had when the stack built it
itself, with the stateful resources' logical ids pinned: ``FileSystem`` and one ``Dra...`` per directory."""

from __future__ import annotations

import hashlib
import re

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from fmcluster.constructs.kms import KEY_USE_ACTIONS
from fmcluster.constructs.logical_ids import pin_logical_id
from fmcluster.platforms.storage.forms import BuiltStore, StorageScope
from fmcluster.platforms.storage.fsx_lustre.construct import LustreFileSystem, LustreSecurityGroup
from fmcluster.platforms.storage.fsx_lustre.mount import free_capacity_alarm, lustre_mount
from fmcluster.platforms.storage.fsx_lustre.settings import DataRepositoryAssociation, Fsx

# FSx creates one service-linked role per file system to read and write linked buckets.
FSX_S3_ROLE = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
FILE_SYSTEM_ID = "FileSystem"


def association_logical_id(file_system_path: str) -> str:
    """Stable per directory, whatever the order of the spec's list."""
    words = "".join(w.capitalize() for w in re.split(r"[^A-Za-z0-9]+", file_system_path) if w) or "Root"
    return f"Dra{words[:40]}{hashlib.sha256(file_system_path.encode()).hexdigest()[:8]}"


def linked_role_statement(stack: Stack) -> iam.PolicyStatement:
    """The data key's statement for FSx's data repository role. The role's name holds the file system id, which does
    not exist yet (and a key policy may not name a missing principal), so the statement matches the role by ARN
    pattern within this account."""
    return iam.PolicyStatement(
        sid="FsxDataRepositoryRoleUsesKey",
        principals=[iam.AnyPrincipal()],
        actions=list(KEY_USE_ACTIONS),
        resources=["*"],
        conditions={
            "StringEquals": {"aws:PrincipalAccount": stack.account},
            "ArnLike": {"aws:PrincipalArn": f"arn:{stack.partition}:iam::{stack.account}:{FSX_S3_ROLE}"},
        },
    )


def build(where: StorageScope, fsx_spec: Fsx) -> BuiltStore:
    stack = where.scope
    outputs = {}
    if fsx_spec.efa:
        # EFA needs all traffic to and from the clients' group: share the nodes' EFA group.
        groups = [where.node_security_group]
    else:
        lustre_sg = LustreSecurityGroup(stack, "LustreSecurityGroup", vpc=where.vpc, clients=where.node_security_group)
        groups = [lustre_sg.security_group]
        outputs["FileSystemSecurityGroupId"] = lustre_sg.security_group.security_group_id
    fs = LustreFileSystem(
        stack,
        "FileSystem",
        subnet=where.subnet,
        security_groups=groups,
        key=where.key,
        deployment_type=fsx_spec.deployment_type,
        storage_capacity_gib=fsx_spec.storage_capacity_gib,
        throughput_per_tib=fsx_spec.throughput,
        lustre_version=fsx_spec.lustre_version,
        efa=fsx_spec.efa,
        metadata_iops=fsx_spec.metadata_iops,
        compression=fsx_spec.compression,
        weekly_maintenance_start=fsx_spec.weekly_maintenance_start,
        backup_retention_days=fsx_spec.backup_retention_days,
        daily_backup_start=fsx_spec.daily_backup_start,
    )
    pin_logical_id(fs.resource, FILE_SYSTEM_ID)
    for dra in fsx_spec.data_repository_associations:
        resource = fs.add_data_repository_association(
            association_logical_id(dra.file_system_path),
            file_system_path=dra.file_system_path,
            repository_path=_repository_path(dra, where.data_bucket_name),
            auto_import=dra.auto_import,
            auto_export=dra.auto_export,
            import_metadata_on_create=dra.import_metadata_on_create,
            imported_file_chunk_size_mib=dra.imported_file_chunk_size_mib,
        )
        pin_logical_id(resource, association_logical_id(dra.file_system_path))
    mount = lustre_mount(file_system_id=fs.file_system_id, dns_name=fs.dns_name, mount_name=fs.mount_name,
                         mount_point=fsx_spec.mount_point, efa=fsx_spec.efa, capacity_gib=fsx_spec.storage_capacity_gib)
    outputs.update({"FileSystemId": fs.file_system_id, "FileSystemDnsName": fs.dns_name,
                    "FileSystemMountName": fs.mount_name, "MountCommand": mount.command})
    return BuiltStore(
        mount=mount,
        outputs=outputs,
        # the names are those of CDK's automatic references, so a deployed importer keeps its export
        exports=(fs.file_system_id, fs.dns_name, fs.mount_name),
        alarms=(free_capacity_alarm(file_system_id=fs.file_system_id, capacity_gib=fsx_spec.storage_capacity_gib),),
    )


def _repository_path(dra: DataRepositoryAssociation, data_bucket_name: str) -> str:
    if dra.repository_path:
        return dra.repository_path
    return f"s3://{data_bucket_name}/{dra.data_bucket_prefix}"

"""FSx for Lustre over the L1 resources: aws_fsx.LustreFileSystem has no EFA, metadata or DRA support."""

from __future__ import annotations

from typing import List, Optional, Sequence

from aws_cdk import CfnResource, RemovalPolicy, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_kms as kms
from constructs import Construct

# LNet and the Lustre servers' ports (FSx Lustre guide, "File system access control with Amazon VPC").
LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))


def retain(resource: CfnResource) -> None:
    """Kept when the stack is deleted and when an update would replace it."""
    resource.apply_removal_policy(RemovalPolicy.RETAIN)


class LustreSecurityGroup(Construct):
    """The file system's group: Lustre ports from itself (its servers) and to/from the client nodes only."""

    def __init__(self, scope: Construct, id: str, *, vpc: ec2.IVpc, clients: ec2.IConnectable) -> None:
        super().__init__(scope, id)
        self.security_group = ec2.SecurityGroup(
            self, "Group", vpc=vpc, allow_all_outbound=False,
            description="FSx for Lustre: LNet (988) and Lustre (1018-1023) between servers and cluster nodes",
        )
        for port in LUSTRE_PORTS:
            self.security_group.connections.allow_internally(port, "Lustre servers")
            self.security_group.connections.allow_from(clients, port, "cluster nodes mount the file system")
            self.security_group.connections.allow_to(clients, port, "Lustre servers call back to clients")


class LustreFileSystem(Construct):
    """An FSx for Lustre file system, retained with its associations whatever happens to the stack.

    :param subnet: one subnet in the nodes' AZ that never changes with compute (SubnetIds is create-only).
    :param security_groups: for an EFA-enabled file system, the nodes' EFA group (all traffic to and from
        itself, as EFA requires); otherwise a `LustreSecurityGroup`.
    :param key: encrypts a PERSISTENT_2 file system and its backups (SCRATCH_2 always uses an FSx key).
    :param metadata_iops: None for AUTOMATIC metadata IOPS (PERSISTENT_2 only).

    Exposes ``file_system_id``, ``dns_name``, ``mount_name``, ``resource``, ``connections``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        subnet: ec2.ISubnet,
        security_groups: Sequence[ec2.ISecurityGroup],
        key: kms.IKey,
        deployment_type: str = "PERSISTENT_2",
        storage_capacity_gib: int = 4800,
        throughput_per_tib: Optional[int] = 250,
        lustre_version: str = "2.15",
        efa: bool = False,
        metadata_iops: Optional[int] = None,
        compression: str = "LZ4",
        weekly_maintenance_start: str = "7:03:00",
        backup_retention_days: int = 7,
        daily_backup_start: str = "05:00",
    ) -> None:
        super().__init__(scope, id)
        persistent = deployment_type.startswith("PERSISTENT")
        self.connections = ec2.Connections(security_groups=list(security_groups))
        config = fsx.CfnFileSystem.LustreConfigurationProperty(
            deployment_type=deployment_type,
            per_unit_storage_throughput=throughput_per_tib if persistent else None,
            data_compression_type=compression,
            efa_enabled=True if efa else None,
            # metadata configuration: PERSISTENT_2 on Lustre 2.15 (2.12 servers have a fixed MDT)
            metadata_configuration=_metadata(metadata_iops) if persistent and lustre_version != "2.12" else None,
            weekly_maintenance_start_time=weekly_maintenance_start,
            automatic_backup_retention_days=backup_retention_days if persistent else None,
            daily_automatic_backup_start_time=daily_backup_start if persistent and backup_retention_days else None,
            copy_tags_to_backups=True if persistent else None,
            # import/export errors of the data repository associations go to /aws/fsx/lustre
            log_configuration=fsx.CfnFileSystem.LogConfigurationProperty(level="WARN_ERROR"),
        )
        self.resource = fsx.CfnFileSystem(
            self,
            "Resource",
            file_system_type="LUSTRE",
            file_system_type_version=lustre_version,
            storage_type="SSD",
            storage_capacity=storage_capacity_gib,
            subnet_ids=[subnet.subnet_id],
            security_group_ids=[sg.security_group_id for sg in security_groups],
            kms_key_id=key.key_arn if persistent else None,
            lustre_configuration=config,
        )
        retain(self.resource)
        self.associations: List[fsx.CfnDataRepositoryAssociation] = []

    @property
    def file_system_id(self) -> str:
        return self.resource.ref

    @property
    def dns_name(self) -> str:
        return self.resource.attr_dns_name

    @property
    def mount_name(self) -> str:
        return self.resource.attr_lustre_mount_name

    def add_data_repository_association(
        self,
        id: str,
        *,
        file_system_path: str,
        repository_path: str,
        auto_import: Sequence[str] = ("NEW", "CHANGED", "DELETED"),
        auto_export: Sequence[str] = (),
        import_metadata_on_create: bool = True,
        imported_file_chunk_size_mib: int = 1024,
    ) -> fsx.CfnDataRepositoryAssociation:
        """Link `file_system_path` to `repository_path` (s3://bucket/prefix/). FSx reaches the bucket
        through its service-linked role AWSServiceRoleForFSxS3Access_<fs-id>, which it creates itself;
        an SSE-KMS bucket's key policy must let that role use the key (see the storage stack)."""
        if not Token.is_unresolved(repository_path) and not repository_path.startswith("s3://"):
            raise ValueError(f"{repository_path!r}: a data repository path is s3://bucket/prefix/")
        dra = fsx.CfnDataRepositoryAssociation(
            self,
            id,
            file_system_id=self.file_system_id,
            file_system_path=file_system_path,
            data_repository_path=repository_path,
            batch_import_meta_data_on_create=import_metadata_on_create,
            imported_file_chunk_size=imported_file_chunk_size_mib,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(events=list(auto_import))
                if auto_import else None,
                auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(events=list(auto_export))
                if auto_export else None,
            ),
        )
        retain(dra)
        self.associations.append(dra)
        return dra


def _metadata(iops: Optional[int]) -> fsx.CfnFileSystem.MetadataConfigurationProperty:
    if iops is None:
        return fsx.CfnFileSystem.MetadataConfigurationProperty(mode="AUTOMATIC")
    return fsx.CfnFileSystem.MetadataConfigurationProperty(mode="USER_PROVISIONED", iops=iops)

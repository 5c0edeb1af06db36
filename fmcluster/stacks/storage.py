"""`<name>-storage`: the stateful tier. KMS key, data bucket (+ access-log bucket), FSx for Lustre and its
data repository associations. Everything here is retained, has a fixed logical id, and is built from the
spec's `storage` section and the network alone, so no compute change can alter it."""

from __future__ import annotations

import hashlib
import re
from typing import Optional, cast

from aws_cdk import CfnElement, CfnOutput, Fn, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.data_bucket import BucketLifecycle, DataBucket, grant_data_access
from fmcluster.constructs.fsx_lustre import LustreFileSystem, LustreSecurityGroup
from fmcluster.constructs.kms import KEY_USE_ACTIONS, ClusterKey
from fmcluster.nag import acknowledge
from fmcluster.spec import ClusterSpec, DataRepositoryAssociation, Fsx
from fmcluster.spec.data_access import node_data_access
from fmcluster.stacks.network import NetworkStack

# FSx creates one service-linked role per file system to read and write linked buckets.
FSX_S3_ROLE = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"


def pin_logical_id(construct: Construct, logical_id: str) -> None:
    """Fix a stateful resource's logical id so refactoring the construct tree never replaces it."""
    cfn = construct if isinstance(construct, CfnElement) else construct.node.default_child
    if not isinstance(cfn, CfnElement):
        raise TypeError(f"{construct.node.path} is not a CloudFormation element")
    cfn.override_logical_id(logical_id)


def association_logical_id(file_system_path: str) -> str:
    """Stable per directory, whatever the order of the spec's list."""
    words = "".join(w.capitalize() for w in re.split(r"[^A-Za-z0-9]+", file_system_path) if w) or "Root"
    return f"Dra{words[:40]}{hashlib.sha256(file_system_path.encode()).hexdigest()[:8]}"


class StorageStack(Stack):
    """Exposes ``key``, ``data_bucket``, ``file_system`` (None without `storage.fsx`) and ``mount_point``."""

    def __init__(self, scope: Construct, id: str, *, spec: ClusterSpec, network: NetworkStack, **kwargs: object) -> None:
        super().__init__(scope, id, termination_protection=True, **kwargs)  # type: ignore[arg-type]
        self.spec = spec
        storage = spec.storage
        self.key = ClusterKey(
            self,
            "DataKey",
            description=f"{spec.name}: data bucket and FSx for Lustre",
            statements=[self._fsx_linked_role_statement()],
        )
        pin_logical_id(self.key.key, "DataKey")
        bucket = storage.data_bucket
        self.data_bucket = DataBucket(
            self,
            "Data",
            key=self.key.key,
            existing_name=bucket.existing_name,
            lifecycle=[BucketLifecycle(**rule.model_dump()) for rule in bucket.lifecycle_rules],
            access_log_retention_days=bucket.access_log_retention_days,
        )
        if self.data_bucket.log_bucket is not None:
            pin_logical_id(cast(Construct, self.data_bucket.bucket), "DataBucket")
            pin_logical_id(self.data_bucket.log_bucket, "AccessLogBucket")
        self._export("DataBucketName", self.data_bucket.bucket_name)
        self._export("DataBucketArn", self.data_bucket.bucket_arn)
        self._export("DataKeyArn", self.key.key_arn)

        self.file_system: Optional[LustreFileSystem] = None
        self.mount_point: Optional[str] = None
        if storage.fsx is not None:
            self._file_system(network, storage.fsx)

    def _export(self, name: str, value: str) -> None:
        CfnOutput(self, name, value=value, export_name=self.export_name(name))

    def export_name(self, name: str) -> str:
        """Exports carry fixed names so other stacks' policies name them predictably (and cdk-nag
        acknowledgments can refer to them)."""
        return f"{self.stack_name}-{name}"

    def imported(self, name: str) -> str:
        """An export of this stack, for another stack (which must `add_dependency` on this one)."""
        return Fn.import_value(self.export_name(name))

    def grant_data_access(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read the data bucket, list it and use its key; put and delete objects only where the spec's associations
        make S3 the source (spec/data_access.py: never the checkpoint prefix, never an exported prefix)."""
        access = node_data_access(self.spec)
        bucket = self.export_name("DataBucketArn")
        grant = grant_data_access(grantee, bucket_arn=self.imported("DataBucketArn"), key_arn=self.data_key_arn,
                                  write_prefixes=access.write, delete_prefixes=access.delete)
        principal = grantee.grant_principal
        if isinstance(principal, Construct):
            acknowledge(principal, f"AwsSolutions-IAM5[Resource::{bucket}/*]",
                        "Nodes read datasets anywhere in the cluster's own data bucket (GetObject and GetObjectVersion "
                        "only; writes and deletes are granted per prefix).")
            for prefix in sorted(set(access.write)):
                acknowledge(principal, f"AwsSolutions-IAM5[Resource::{bucket}/{prefix}*]",
                            f"Objects under {prefix}, the S3 side of a data repository association that imports into "
                            "the file system; the object actions are named one by one.")
        return grant

    @property
    def data_key_arn(self) -> Optional[str]:
        """The key a consumer needs for the data bucket (None for an existing bucket: its own key applies)."""
        return None if self.spec.storage.data_bucket.existing_name else self.imported("DataKeyArn")

    def _fsx_linked_role_statement(self) -> iam.PolicyStatement:
        # The role's name holds the file system id, which does not exist yet (and a key policy may not
        # name a missing principal), so the statement matches the role by ARN pattern within this account.
        return iam.PolicyStatement(
            sid="FsxDataRepositoryRoleUsesKey",
            principals=[iam.AnyPrincipal()],
            actions=list(KEY_USE_ACTIONS),
            resources=["*"],
            conditions={
                "StringEquals": {"aws:PrincipalAccount": self.account},
                "ArnLike": {"aws:PrincipalArn": f"arn:{self.partition}:iam::{self.account}:{FSX_S3_ROLE}"},
            },
        )

    def _file_system(self, network: NetworkStack, fsx_spec: Fsx) -> None:
        nodes = network.node_security_group.security_group
        if fsx_spec.efa:
            # EFA needs all traffic to and from the clients' group: share the nodes' EFA group.
            groups = [nodes]
        else:
            lustre_sg = LustreSecurityGroup(self, "LustreSecurityGroup", vpc=network.vpc, clients=nodes)
            groups = [lustre_sg.security_group]
            CfnOutput(self, "FileSystemSecurityGroupId", value=lustre_sg.security_group.security_group_id)
        fs = LustreFileSystem(
            self,
            "FileSystem",
            subnet=network.storage_subnet,
            security_groups=groups,
            key=self.key.key,
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
        pin_logical_id(fs.resource, "FileSystem")
        for dra in fsx_spec.data_repository_associations:
            resource = fs.add_data_repository_association(
                association_logical_id(dra.file_system_path),
                file_system_path=dra.file_system_path,
                repository_path=self._repository_path(dra),
                auto_import=dra.auto_import,
                auto_export=dra.auto_export,
                import_metadata_on_create=dra.import_metadata_on_create,
                imported_file_chunk_size_mib=dra.imported_file_chunk_size_mib,
            )
            pin_logical_id(resource, association_logical_id(dra.file_system_path))
        self.file_system = fs
        self.mount_point = fsx_spec.mount_point
        # Exported whether or not this spec's orchestrator imports them (each kind mounts differently), so the exports
        # never depend on the orchestrator: CloudFormation refuses to remove an export another stack imports. The
        # names are those of CDK's automatic references, so a deployed importer keeps its export.
        for value in (fs.file_system_id, fs.dns_name, fs.mount_name):
            self.export_value(value)
        CfnOutput(self, "FileSystemId", value=fs.file_system_id)
        CfnOutput(self, "FileSystemDnsName", value=fs.dns_name)
        CfnOutput(self, "FileSystemMountName", value=fs.mount_name)
        CfnOutput(
            self,
            "MountCommand",
            value=f"mount -t lustre -o noatime,flock {fs.dns_name}@tcp:/{fs.mount_name} {fsx_spec.mount_point}",
        )

    def _repository_path(self, dra: DataRepositoryAssociation) -> str:
        if dra.repository_path:
            return dra.repository_path
        return f"s3://{self.data_bucket.bucket_name}/{dra.data_bucket_prefix}"

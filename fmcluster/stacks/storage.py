"""`<name>-storage`: the stateful tier. KMS key, data bucket (+ access-log bucket), and every shared store the spec
configures (each store's folder under fmcluster/platforms/storage/ builds its own resources here). Everything here is
retained, has a fixed logical id, and is built from the spec's `storage` section and the network alone, so no compute
change can alter it."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, cast

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.data_bucket import BucketLifecycle, DataBucket, grant_data_access
from fmcluster.constructs.kms import ClusterKey
from fmcluster.constructs.logical_ids import pin_logical_id
from fmcluster.nag import acknowledge
from fmcluster.platforms.storage import Mounts, Store
from fmcluster.platforms.storage.forms import Alarm, BuiltStore, StorageScope
from fmcluster.spec import ClusterSpec
from fmcluster.spec.data_access import node_data_access
from fmcluster.stacks.network import NetworkStack


def storage_description(spec: ClusterSpec, stores: Sequence[Store]) -> str:
    """The stack's description: what it holds, naming every store the spec configures and those always named."""
    named = [s.resources for s in stores if s.always_described or s.section(spec) is not None]
    return f"fmcluster {spec.name}: " + ", ".join(["KMS key", "data bucket", *named])


class StorageStack(Stack):
    """Exposes ``key``, ``data_bucket``, ``built`` (store name -> what it built) and ``mounts`` (every built store's
    mount, for the cluster stack) and ``alarms`` (for the observability stack).

    :param stores: every registered store (the composition root's `fmcluster.registry.stores()`), in order; those the
        spec configures are built.
    """

    def __init__(self, scope: Construct, id: str, *, spec: ClusterSpec, network: NetworkStack,
                 stores: Sequence[Store] = (), **kwargs: object) -> None:
        super().__init__(scope, id, termination_protection=True, **kwargs)  # type: ignore[arg-type]
        self.spec = spec
        storage = spec.storage
        self.key = ClusterKey(
            self,
            "DataKey",
            description=f"{spec.name}: " + " and ".join(["data bucket", *(s.title for s in stores if s.uses_data_key)]),
            statements=[statement for s in stores for statement in s.key_statements(self)],
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

        self.built: Dict[str, BuiltStore] = {}
        where = StorageScope(scope=self, spec=spec, vpc=network.vpc, subnet=network.storage_subnet,
                             node_security_group=network.node_security_group.security_group, key=self.key.key,
                             data_bucket_name=self.data_bucket.bucket_name, log_bucket=self.data_bucket.log_bucket)
        for store in stores:
            if store.section(spec) is not None:
                self.built[store.name] = self._add(store.build(where))
        self.mounts = Mounts(stores=tuple(stores), mounts=tuple(b.mount for b in self.built.values()))

    def _add(self, built: BuiltStore) -> BuiltStore:
        for name, value in built.outputs.items():
            CfnOutput(self, name, value=value)
        # Exported whether or not this spec's orchestrator imports them (each kind mounts differently), so the
        # exports never depend on the orchestrator.
        for value in built.exports:
            self.export_value(value)
        return built

    @property
    def alarms(self) -> List[Alarm]:
        return [a for b in self.built.values() for a in b.alarms]

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

"""`<name>-cluster`: compute — the orchestrator the spec names, with its node groups, roles and the node
runtime. Replaceable: destroying it touches no data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.store_permissions import grant_permissions
from fmcluster.orchestrators.context import Orchestration, OrchestrationContext
from fmcluster.platforms.ec2.node_builder import NodeGroupBuilder, construct_id
from fmcluster.platforms.storage import Mounts
from fmcluster.spec import ClusterSpec
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.observability import ObservabilityStack
from fmcluster.stacks.storage import StorageStack

if TYPE_CHECKING:
    from fmcluster.orchestrators.kind import OrchestratorKind


class ClusterStack(Stack):
    """Binds the orchestrator kind to one `OrchestrationContext`, grants the nodes' principal the data bucket, what
    the stores' mounts need and AMP remote write, and outputs each EC2 node group's launch template and placement group.

    Exposes ``context`` and ``orchestration`` (what the kind's `bind` returned: its construct, grantee and EC2 node
    groups).

    :param kind: the spec's orchestrator kind (the composition root looks it up: `fmcluster.registry.kind_of`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        spec: ClusterSpec,
        kind: OrchestratorKind[Any],
        network: NetworkStack,
        storage: Optional[StorageStack] = None,
        observability: Optional[ObservabilityStack] = None,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        if storage is not None:
            self.add_stack_dependency(storage)
        if kind.name != spec.orchestrator.type:
            raise ValueError(f"kind: {kind.name} is not the spec's orchestrator {spec.orchestrator.type}")
        mounts = storage.mounts if storage is not None else Mounts()
        remote_write_url = observability.remote_write_url if observability is not None else None
        # launch templates do not pass stack tags to instances: name them explicitly
        instance_tags = {"fmcluster:cluster": spec.name, **spec.tags}
        security_group = network.node_security_group.security_group
        self.context = OrchestrationContext(
            spec=spec,
            subnets=list(network.node_subnets),
            extra_subnets=list(network.extra_subnets),
            vpc=network.vpc,
            metrics_workspace_arn=observability.workspace_arn if observability is not None else None,
            data_bucket_arn=storage.imported("DataBucketArn") if storage is not None else None,
            data_key_arn=storage.data_key_arn if storage is not None else None,
            security_groups=[security_group],
            mounts=mounts,
            remote_write_url=remote_write_url,
            instance_tags=instance_tags,
            grant_remote_write=observability.grant_remote_write if observability is not None else None,
            node_builder=NodeGroupBuilder(
                spec=spec,
                subnet_id=network.node_subnets[0].subnet_id,
                security_group_ids=[security_group.security_group_id],
                mounts=mounts,
                remote_write_url=remote_write_url,
                instance_tags=instance_tags,
            ),
        )
        self.orchestration: Orchestration = kind.bind(self, self.context)
        grantee = self.orchestration.grantee
        if observability is not None:
            observability.grant_remote_write(grantee)
        if storage is not None:
            storage.grant_data_access(grantee)
        self._grant_mounts(self.orchestration.node_principal or grantee, mounts)
        for name, group in self.orchestration.ec2_node_groups.items():
            gid = construct_id(name)
            if group.placement_group_name is not None:
                CfnOutput(self, f"{gid}PlacementGroup", value=group.placement_group_name)
            CfnOutput(self, f"{gid}LaunchTemplateId", value=group.launch_template_id)


    def _grant_mounts(self, grantee: iam.IGrantable, mounts: Mounts) -> None:
        """What each store says the nodes' principal needs to reach its data (`Mount.node_permissions`): the
        orchestration's ``node_principal``, or its ``grantee``."""
        for mount in mounts:
            grant_permissions(grantee, mount.node_permissions, stack=self)

"""AWS ParallelCluster composed from the spec: ParallelCluster's provider (nested stack), the policies its node
roles attach, fmcluster's placement groups, the OnNodeConfigured script, and the `Custom::PclusterCluster` with
the rendered configuration, on the cluster's node subnet, node security group and shared file system."""

from __future__ import annotations

import json
from typing import Dict

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.placement_group import UltraClusterPlacementGroup
from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.orchestrators.ec2_nodes import construct_id
from fmcluster.orchestrators.parallelcluster.cluster import PclusterCluster
from fmcluster.orchestrators.parallelcluster.config import ClusterInputs, cluster_configuration
from fmcluster.orchestrators.parallelcluster.node_policy import NodePolicy
from fmcluster.orchestrators.parallelcluster.node_script import OnNodeConfiguredScript
from fmcluster.orchestrators.parallelcluster.provider import ParallelClusterProvider
from fmcluster.orchestrators.parallelcluster.settings import (
    CLUSTER_NAME_OUTPUT,
    HEAD_NODE_GROUP,
    PCLUSTER_VERSION,
    VALIDATION_MESSAGES_OUTPUT,
    cluster_name,
    reservation_placement_group,
    settings_of,
)
from fmcluster.profiles import node_profile
from fmcluster.spec import ClusterSpec, NodeGroup


def node_profile_json(spec: ClusterSpec, group: NodeGroup) -> str:
    """The group's NodeProfile, compact and without the catalog facts, which the node reads from the catalog shipped
    in the same runtime asset. Its minimum versions are the instance type's compatibility floors, which the official
    ParallelCluster 3.16.1 AMI meets (docs/validation.md, "Each orchestrator's default AMI"; tested in
    tests/runtime/test_default_amis.py); being behind the newest known-good bundle only warns."""
    profile = node_profile(spec, group)
    data = {k: v for k, v in profile.to_dict().items() if k != "facts"}
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def needs_own_placement_group(spec: ClusterSpec, group: NodeGroup) -> bool:
    return (group.placement_strategy != "none" and group.capacity.type != "capacity-block"
            and reservation_placement_group(spec, group) is None)


class ParallelClusterOrchestration(Construct):
    """Exposes ``provider``, ``cluster`` (the `PclusterCluster`), ``compute_policy`` (``grantee``),
    ``head_node_policy``, ``script``, ``placement_groups`` (by node group) and ``configuration``."""

    def __init__(self, scope: Construct, id: str, *, context: OrchestrationContext) -> None:
        super().__init__(scope, id)
        spec = context.spec
        settings = settings_of(spec)
        stack = Stack.of(self)
        name = cluster_name(spec)
        runtime = context.node_groups.runtime(self)
        self.script = OnNodeConfiguredScript(
            self,
            "OnNodeConfigured",
            runtime=runtime,
            region=stack.region,
            remote_write_url=context.remote_write_url,
            cluster=spec.name,
            scrape_interval=spec.observability.scrape_interval_seconds,
        )
        self.compute_policy = NodePolicy(self, "ComputePolicy", name=f"parallelcluster-{name}-{stack.region}-compute",
                                         description=f"fmcluster {spec.name}: ParallelCluster compute nodes")
        self.head_node_policy = NodePolicy(self, "HeadNodePolicy", name=f"parallelcluster-{name}-{stack.region}-head",
                                           description=f"fmcluster {spec.name}: ParallelCluster head node")
        # compute nodes fetch the script and the runtime; the head node does only to run the collectors
        self.script.grant_read(self.compute_policy)
        runtime.grant_read(self.compute_policy)
        head_node_actions = None
        if context.remote_write_url is not None:
            head_node_actions = self.script.action(role="head", node_group=HEAD_NODE_GROUP)
            self.script.grant_read(self.head_node_policy)
            runtime.grant_read(self.head_node_policy)
            if context.grant_remote_write is not None:
                context.grant_remote_write(self.head_node_policy)

        self.placement_groups: Dict[str, UltraClusterPlacementGroup] = {}
        for group in spec.node_groups:
            if needs_own_placement_group(spec, group):
                self.placement_groups[group.name] = UltraClusterPlacementGroup(
                    self, f"{construct_id(group.name)}Placement", strategy=group.placement_strategy,
                    partitions=group.placement.partitions if group.placement else None,
                )
        fsx = context.file_system
        self.configuration = cluster_configuration(spec, ClusterInputs(
            subnet_id=context.subnet_ids[0],
            security_group_id=context.security_group_ids[0],
            head_node_policy_arn=self.head_node_policy.policy_arn,
            compute_policy_arn=self.compute_policy.policy_arn,
            placement_groups={g: pg.group_name for g, pg in self.placement_groups.items()},
            file_system_id=fsx.file_system_id if fsx is not None else None,
            mount_point=fsx.mount_point if fsx is not None else None,
            head_node_actions=head_node_actions,
            compute_actions={
                g.name: self.script.action(role="compute", node_group=g.name, profile_json=node_profile_json(spec, g),
                                           level=spec.validation.level, policy=spec.validation.policy)
                for g in spec.node_groups
            },
            tags=context.instance_tags,
        ))
        self.provider = ParallelClusterProvider(self, "Provider", version=PCLUSTER_VERSION)
        self.cluster = PclusterCluster(
            self,
            "Cluster",
            service_token=self.provider.service_token,
            cluster_name=name,
            configuration=self.configuration,
            deletion_policy=settings.deletion_policy,
        )
        runtime.required_by(self.cluster)  # the cluster's nodes fetch the runtime as they configure
        CfnOutput(scope, CLUSTER_NAME_OUTPUT, value=name,
                  description="ParallelCluster cluster (and its CloudFormation stack): pcluster describe-cluster -n NAME")
        CfnOutput(scope, VALIDATION_MESSAGES_OUTPUT, value=self.cluster.validation_messages,
                  description="ParallelCluster's validation messages of the last create or update (JSON)")
        CfnOutput(scope, "HeadNodeInstanceId", value=self.cluster.attribute("headNode.instanceId"),
                  description="aws ssm start-session --target <this id>")

    @property
    def grantee(self) -> iam.IGrantable:
        return self.compute_policy

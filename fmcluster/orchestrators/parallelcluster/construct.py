"""AWS ParallelCluster composed from the spec: ParallelCluster's provider (nested stack), the policies its node
roles attach, fmcluster's placement groups, the OnNodeConfigured script (after mounts.sh where a store has no
SharedStorage form), and the `Custom::PclusterCluster` with
the rendered configuration, on the cluster's node subnet, node security group and shared file system."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.placement_group import UltraClusterPlacementGroup
from fmcluster.constructs.store_permissions import grant_permissions
from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.orchestrators.parallelcluster.assets import NodeAssets
from fmcluster.orchestrators.parallelcluster.cluster import PclusterCluster
from fmcluster.orchestrators.parallelcluster.config import ClusterInputs, cluster_configuration
from fmcluster.orchestrators.parallelcluster.mounts import mounts_script
from fmcluster.orchestrators.parallelcluster.node_policy import NodePolicy
from fmcluster.orchestrators.parallelcluster.node_script import OnNodeConfiguredScript
from fmcluster.orchestrators.parallelcluster.provider import ParallelClusterProvider
from fmcluster.orchestrators.parallelcluster.settings import (
    CLUSTER_NAME_OUTPUT,
    HEAD_NODE_GROUP,
    PCLUSTER_VERSION,
    VALIDATION_MESSAGES_OUTPUT,
    ParallelClusterOrchestrator,
    cluster_name,
)
from fmcluster.platforms.ec2.node_builder import construct_id
from fmcluster.platforms.storage import PARALLELCLUSTER
from fmcluster.profiles import node_profile
from fmcluster.spec import ClusterSpec, NodeGroup


def node_profile_json(spec: ClusterSpec, group: NodeGroup) -> str:
    """The group's NodeProfile, compact and without the catalog facts, which the node reads from the catalog shipped
    in the same runtime. Its minimum versions are the instance type's compatibility floors, which the official
    ParallelCluster 3.16.1 AMI meets (docs/validation.md, "Each orchestrator's default AMI"; tested in
    tests/runtime/test_default_amis.py); being behind the newest known-good bundle only warns. Its policy is the one
    ParallelCluster nodes apply (`ClusterSpec.validation_policy`), and with its level the node reads both from here,
    not from the queue's CustomActions."""
    profile = node_profile(spec, group)
    data = {k: v for k, v in profile.to_dict().items() if k != "facts"}
    data["policy"] = spec.validation_policy
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def node_settings(spec: ClusterSpec, remote_write_url: Optional[str]) -> Dict[str, Any]:
    """settings.json: what the script reads on every node besides the profile (no remote write: no collectors)."""
    return {"cluster": spec.name, "remote_write_url": remote_write_url,
            "scrape_interval": spec.observability.scrape_interval_seconds}


def needs_own_placement_group(spec: ClusterSpec, group: NodeGroup) -> bool:
    """fmcluster creates a placement group only where the group's strategy asks for one: never for a Capacity Block,
    an ODCR or a group launched into an existing group (NodeGroup.placement_strategy is none for those)."""
    return group.placement_strategy != "none" and group.capacity.type not in ("capacity-block", "odcr")


class ParallelClusterOrchestration(Construct):
    """Exposes ``provider``, ``cluster`` (the `PclusterCluster`), ``compute_policy`` (``grantee``),
    ``head_node_policy``, ``assets`` (the node assets bucket), ``script``, ``placement_groups`` (by node group) and
    ``configuration``."""

    def __init__(self, scope: Construct, id: str, *, context: OrchestrationContext) -> None:
        super().__init__(scope, id)
        spec = context.spec
        settings = ParallelClusterOrchestrator.of(spec).parallelcluster
        stack = Stack.of(self)
        name = cluster_name(spec)
        # ParallelCluster mounts each store that gives its SharedStorage entry; the nodes mount the others (their boot
        # form) from mounts.sh, the first script of their custom actions
        by_nodes = context.mounts.mounted_by_nodes(PARALLELCLUSTER)
        # Everything a node reads that changes with fmcluster or the collectors' settings is published under stable
        # keys; the configuration names only those keys (ParallelCluster cannot update the head node's actions).
        self.assets = NodeAssets(
            self,
            "NodeAssets",
            settings=node_settings(spec, context.remote_write_url),
            profiles={g.name: node_profile_json(spec, g) for g in spec.node_groups},
            retain=settings.deletion_policy == "Retain",
            mounts=mounts_script(by_nodes, os=settings.os) if by_nodes else None,
        )
        self.script = OnNodeConfiguredScript(self, "OnNodeConfigured", assets=self.assets, region=stack.region)
        self.compute_policy = NodePolicy(self, "ComputePolicy", name=f"parallelcluster-{name}-{stack.region}-compute",
                                         description=f"fmcluster {spec.name}: ParallelCluster compute nodes")
        self.head_node_policy = NodePolicy(self, "HeadNodePolicy", name=f"parallelcluster-{name}-{stack.region}-head",
                                           description=f"fmcluster {spec.name}: ParallelCluster head node")
        # compute nodes read their profiles; the head node runs the same script (collectors, no validation)
        self.assets.grant_read(self.compute_policy, profiles=[g.name for g in spec.node_groups])
        self.assets.grant_report(self.compute_policy, groups=[g.name for g in spec.node_groups])
        self.assets.grant_read(self.head_node_policy)
        if context.remote_write_url is not None and context.grant_remote_write is not None:
            context.grant_remote_write(self.head_node_policy)
        # the head node mounts them too: what the stores need, as the cluster stack grants the compute policy
        for mount in by_nodes:
            grant_permissions(self.head_node_policy, mount.node_permissions, stack=stack)

        self.placement_groups: Dict[str, UltraClusterPlacementGroup] = {}
        for group in spec.node_groups:
            if needs_own_placement_group(spec, group):
                self.placement_groups[group.name] = UltraClusterPlacementGroup(
                    self, f"{construct_id(group.name)}Placement", strategy=group.placement_strategy,
                    partitions=group.placement.partitions if group.placement else None,
                )
        self.configuration = cluster_configuration(spec, ClusterInputs(
            subnet_id=context.subnet_ids[0],
            security_group_id=context.security_group_ids[0],
            head_node_policy_arn=self.head_node_policy.policy_arn,
            compute_policy_arn=self.compute_policy.policy_arn,
            placement_groups={g: pg.group_name for g, pg in self.placement_groups.items()},
            shared_storage=[m.services[PARALLELCLUSTER] for m in context.mounts.served_by(PARALLELCLUSTER)],
            head_node_actions=self.script.head_action(node_group=HEAD_NODE_GROUP),
            compute_actions={g.name: self.script.compute_action(node_group=g.name) for g in spec.node_groups},
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
        self.assets.depend_on_contents(self.cluster.resource)
        if settings.deletion_policy == "Retain":
            # the cluster outlives the stack: what its nodes use stays too (deleting an attached policy or a
            # placement group in use fails, and the stack with it); the node assets bucket is retained above
            self.compute_policy.policy.apply_removal_policy(RemovalPolicy.RETAIN)
            self.head_node_policy.policy.apply_removal_policy(RemovalPolicy.RETAIN)
            for pg in self.placement_groups.values():
                pg.resource.apply_removal_policy(RemovalPolicy.RETAIN)
        CfnOutput(scope, CLUSTER_NAME_OUTPUT, value=name,
                  description="ParallelCluster cluster (and its CloudFormation stack): pcluster describe-cluster -n NAME")
        CfnOutput(scope, VALIDATION_MESSAGES_OUTPUT, value=self.cluster.validation_messages,
                  description="ParallelCluster's validation messages of the last create or update (JSON)")
        head_node = self.cluster.attribute("headNode.instanceId")
        CfnOutput(scope, "HeadNodeInstanceId", value=head_node, description="aws ssm start-session --target <this id>")
        CfnOutput(scope, "SessionCommand", value=f"aws ssm start-session --region {spec.region} --target {head_node}",
                  description="A shell on the head node (Session Manager; the Session Manager plugin for the AWS CLI)")

    @property
    def grantee(self) -> iam.IGrantable:
        return self.compute_policy

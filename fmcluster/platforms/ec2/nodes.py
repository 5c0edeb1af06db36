"""`Ec2Nodes`: EC2 node groups with a node role: the whole of orchestrator none, and what PCS launches its node
groups from."""

from __future__ import annotations

from typing import Dict

from aws_cdk import CfnOutput
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.node_group import Ec2NodeGroup
from fmcluster.constructs.node_role import NodeRole
from fmcluster.platforms.ec2.node_builder import NodeGroupBuilder
from fmcluster.spec import ClusterSpec


class Ec2Nodes(Construct):
    """The node role, the runtime asset it may read, and one `Ec2NodeGroup` per node group.

    Exposes ``node_role``, ``runtime``, ``node_groups`` (by group name) and ``grantee``.

    :param node_builder: the cluster's EC2 node group builder (``OrchestrationContext.node_builder``).
    :param role_path: IAM path of the node role.
    :param set_instance_type: launch templates name the instance type and the node role's profile (plain EC2);
        False when the launching service sets both itself (PCS).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        spec: ClusterSpec,
        node_builder: NodeGroupBuilder,
        role_path: str = "/",
        set_instance_type: bool = True,
    ) -> None:
        super().__init__(scope, id)
        self.node_role = NodeRole(self, "NodeRole", path=role_path, description=f"fmcluster {spec.name} nodes")
        self.runtime = node_builder.runtime(self)
        self.runtime.grant_read(self.node_role.role, groups=[g.name for g in spec.node_groups])
        self.runtime.grant_report(self.node_role.role, groups=[g.name for g in spec.node_groups])
        self.node_groups: Dict[str, Ec2NodeGroup] = {
            group.name: node_builder.build(
                self,
                group,
                instance_profile_arn=self.node_role.instance_profile_arn if set_instance_type else None,
                set_instance_type=set_instance_type,
            )
            for group in spec.node_groups
        }
        CfnOutput(self, "NodeRoleArn", value=self.node_role.role.role_arn)

    @property
    def grantee(self) -> iam.IGrantable:
        return self.node_role.role

"""The IAM role and instance profile GPU nodes run with: least privilege, no wildcard
actions. People reach nodes through SSM Session Manager, so the role carries the SSM
agent's actions (listed, instead of the AmazonSSMManagedInstanceCore managed policy)."""

from __future__ import annotations

from typing import Optional

from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.nag import acknowledge

# What the SSM agent needs for Session Manager and Run Command (the actions of
# AmazonSSMManagedInstanceCore, without its wildcards).
SSM_AGENT_ACTIONS = (
    "ssm:DescribeAssociation",
    "ssm:GetDeployablePatchSnapshotForInstance",
    "ssm:GetDocument",
    "ssm:DescribeDocument",
    "ssm:GetManifest",
    "ssm:ListAssociations",
    "ssm:ListInstanceAssociations",
    "ssm:PutInventory",
    "ssm:PutComplianceItems",
    "ssm:PutConfigurePackageResult",
    "ssm:UpdateAssociationStatus",
    "ssm:UpdateInstanceAssociationStatus",
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
    "ec2messages:AcknowledgeMessage",
    "ec2messages:DeleteMessage",
    "ec2messages:FailMessage",
    "ec2messages:GetEndpoint",
    "ec2messages:GetMessages",
    "ec2messages:SendReply",
)


class NodeRole(Construct):
    """Role + instance profile for cluster nodes.

    :param path: IAM path; AWS PCS requires ``/aws-pcs/`` (or a name starting ``AWSPCS``).
    :param instance_profile: create the role's instance profile; False where the launching service makes its own
        (an EKS managed node group creates one from the node role).
    """

    def __init__(self, scope: Construct, id: str, *, path: str = "/", description: Optional[str] = None,
                 instance_profile: bool = True) -> None:
        super().__init__(scope, id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            path=path,
            description=description or "fmcluster GPU nodes",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="SsmAgent", actions=sorted(SSM_AGENT_ACTIONS), resources=["*"])
        )
        acknowledge(
            self,
            "AwsSolutions-IAM5[Resource::*]",
            "The SSM agent actions (ssm:UpdateInstanceInformation, ssmmessages:*Channel, ec2messages:*, as in "
            "AmazonSSMManagedInstanceCore) support no resource-level permissions (SSM user guide), so they use "
            "Resource *; every action is named, none is a wildcard. An orchestrator that adds such an action "
            "acknowledges it beside this one.",
        )
        self.instance_profile = (iam.CfnInstanceProfile(self, "InstanceProfile", roles=[self.role.role_name], path=path)
                                 if instance_profile else None)

    @property
    def instance_profile_arn(self) -> str:
        if self.instance_profile is None:
            raise ValueError("instance_profile_arn: this NodeRole was made without an instance profile")
        return self.instance_profile.attr_arn

    @property
    def grant_principal(self) -> iam.IPrincipal:
        return self.role

    def add_to_policy(self, statement: iam.PolicyStatement) -> None:
        self.role.add_to_policy(statement)

"""The execution role HyperPod instance groups run with (assumed by sagemaker.amazonaws.com).

The role carries the AWS managed AmazonSageMakerClusterInstanceRolePolicy, which the HyperPod docs require
(https://docs.aws.amazon.com/sagemaker/latest/dg/security-iam-awsmanpol-AmazonSageMakerClusterInstanceRolePolicy.html:
logs on /aws/sagemaker/Clusters/*, cloudwatch:PutMetricData in the /aws/sagemaker/Clusters namespace,
s3:GetObject/ListBucket on ``sagemaker-*`` buckets, ssmmessages channels). AWS updates it when HyperPod's agents need
more; an inline copy would silently fall behind. Inline statements add only what it lacks: the ENI actions of a
VpcConfig (the lifecycle bucket's read is granted explicitly too, so the construct does not rely on the managed
policy's bucket-name pattern).

With a VpcConfig HyperPod creates ENIs in our subnets through this role; the actions are those
of the HyperPod prerequisites (aws-samples/awsome-distributed-training
1.architectures/5.sagemaker-hyperpod/1.AmazonSageMakerClustersExecutionRolePolicy.json,
"AdditionToEnableVpcConfig"), which grants them on ``*``. Here ENI creation is limited to the
cluster's subnets and security groups in this account and region through EC2's resource-level
permissions (unverified: that HyperPod needs nothing outside those).
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import jsii
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.bucket_deployment import nag_resource
from fmcluster.nag import acknowledge

SubnetRef = Union[str, ec2.ISubnet]
SecurityGroupRef = Union[str, ec2.ISecurityGroup]

# Actions that support no resource-level permissions (EC2/SSM/CloudWatch service authorization references).
ENI_DESCRIBE_ACTIONS = (
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
)


def subnet_id(ref: SubnetRef) -> str:
    return ref if isinstance(ref, str) else ref.subnet_id


def security_group_id(ref: SecurityGroupRef) -> str:
    return ref if isinstance(ref, str) else ref.security_group_id


@jsii.implements(iam.IGrantable)
class HyperPodInstanceRole(Construct):
    """Least-privilege role for the nodes of one HyperPod cluster; an ``iam.IGrantable``
    (``grant_principal``) so others grant the stores, data bucket or AMP remote-write to it.

    :param cluster_name: scopes the CloudWatch Logs permissions to ``/aws/sagemaker/Clusters/<cluster_name>/*``.
    :param subnets: the cluster's subnets (ENIs are created there).
    :param security_groups: the cluster's security groups (attached to those ENIs).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        subnets: Sequence[SubnetRef],
        security_groups: Sequence[SecurityGroupRef],
        description: Optional[str] = None,
    ) -> None:
        super().__init__(scope, id)
        if not subnets or not security_groups:
            raise ValueError("subnets, security_groups: at least one of each")
        stack = Stack.of(self)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=description or f"fmcluster HyperPod nodes of {cluster_name}",
        )
        self.role.add_managed_policy(
            iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerClusterInstanceRolePolicy"))
        acknowledge(
            self.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy]",
            "The SageMaker HyperPod docs require AmazonSageMakerClusterInstanceRolePolicy on the instance role; AWS "
            "keeps it current with HyperPod's agents (logs, metrics, SSM sessions, lifecycle buckets), which an inline "
            "copy would not.",
        )

        def arn(service: str, resource: str, account: Optional[str] = None) -> str:
            acct = stack.account if account is None else account
            return f"arn:{stack.partition}:{service}:{stack.region}:{acct}:{resource}"

        eni = arn("ec2", "network-interface/*")
        subnet_arns = [arn("ec2", f"subnet/{subnet_id(s)}") for s in subnets]
        sg_arns = [arn("ec2", f"security-group/{security_group_id(g)}") for g in security_groups]
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="VpcEniCreate", actions=["ec2:CreateNetworkInterface"], resources=[eni, *subnet_arns, *sg_arns]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="VpcEniManage",
                actions=["ec2:CreateNetworkInterfacePermission", "ec2:CreateTags", "ec2:DeleteNetworkInterface"],
                resources=[eni],
            )
        )
        # DetachNetworkInterface also names the instance, which runs in a SageMaker-owned account.
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="VpcEniDetach", actions=["ec2:DetachNetworkInterface"], resources=[eni, arn("ec2", "instance/*", "*")]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="VpcDescribe",
                actions=sorted((*ENI_DESCRIBE_ACTIONS, "ec2:DeleteNetworkInterfacePermission")),
                resources=["*"],
            )
        )
        findings = {
            "*": "ec2:Describe* (VPCs, subnets, security groups, DHCP options, ENIs) and "
            "ec2:DeleteNetworkInterfacePermission support no resource-level permissions.",
            eni: "HyperPod creates, tags, shares and deletes the ENIs of cluster nodes in our subnets; their ids exist only "
            "at run time. Limited to this account and region (and, for creation, to the cluster's subnets and security groups).",
            arn("ec2", "instance/*", "*"): "ec2:DetachNetworkInterface also names the node's instance, which runs in a "
            "SageMaker-owned account whose id we do not know; the ENI resource is limited to this account.",
        }
        for resource, reason in findings.items():
            rule = f"AwsSolutions-IAM5[Resource::{nag_resource(stack, resource)}]"
            acknowledge(self.role, rule, f"HyperPod instance role: {reason}")
        self.cluster_name = cluster_name

    @property
    def role_arn(self) -> str:
        return self.role.role_arn

    @property
    def grant_principal(self) -> iam.IPrincipal:
        return self.role

    def add_to_policy(self, statement: iam.PolicyStatement) -> None:
        self.role.add_to_policy(statement)

"""HyperPod's dependency Helm chart, installed by CloudFormation before the HyperPod cluster: a Lambda-backed custom
resource (``Custom::GitHelmChart``, handler in chart_installer/) fetches the chart from its Git repository's archive at
the pinned commit, checks the chart's Git tree id, and runs helm with the kubectl/Helm layer of the cluster's kubectl
provider. The chart is published in no Helm repository (aws/sagemaker-hyperpod-cli, helm_chart/readme.md: install it
from a checkout), and AWS's own CloudFormation sample installs it from a Lambda at deploy time too; fmcluster pins the
commit and verifies the content instead of cloning a branch.

The function runs in the cluster's private subnets (it reaches the private API endpoint; NAT for GitHub and the
sub-charts' repositories) in the nodes' security group (the control plane's additional group), with a role that may
describe the cluster and holds a cluster-admin access entry (the chart creates CRDs, cluster roles and namespaces; the
installer creates the namespaces the chart uses but does not create itself, cert-manager's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Sequence

from aws_cdk import CustomResource, Duration, RemovalPolicy, Size, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster.constructs.bucket_deployment import nag_resource
from fmcluster.constructs.kms import ClusterKey, logs_key_conditions
from fmcluster.nag import acknowledge, cfn_lint_ignore
from fmcluster.orchestrators.hyperpod_eks.versions import ChartSource
from fmcluster.platforms.kubernetes.cluster import CLUSTER_ADMIN_POLICY

HANDLER_DIR = Path(__file__).resolve().parent / "chart_installer"
RESOURCE_TYPE = "Custom::GitHelmChart"


class GitHelmChart(Construct):
    """One Helm release of a chart taken from a Git repository at a pinned commit.

    :param cluster: the EKS cluster (with a kubectl provider: its kubectl/Helm layer is reused).
    :param kubectl_layer: the kubectl/Helm Lambda layer (``/opt/helm/helm``).
    :param source: repository, commit, chart path, release and namespace.
    :param values: Helm values.
    :param namespaces: namespaces the chart puts objects in and creates no Namespace for; the installer creates them
        (idempotently) before helm runs.
    :param subnets: private subnets with egress in the cluster's VPC; ``security_groups``: groups that reach the
        cluster's private endpoint.

    Exposes ``function``, ``role``, ``resource`` (the custom resource: make the HyperPod cluster depend on it).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        kubectl_layer: lambda_.ILayerVersion,
        source: ChartSource,
        values: Dict[str, Any],
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        security_groups: Sequence[ec2.ISecurityGroup],
        namespaces: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        tree_id = source.tree
        if len(tree_id) != 40 or any(c not in "0123456789abcdef" for c in tree_id):
            raise ValueError(f"tree_id: {tree_id!r} is not a Git object id (40 hex digits)")
        if len(source.commit) != 40:
            raise ValueError(f"source: commit {source.commit!r} is not a full commit id")
        if not subnets or not security_groups:
            raise ValueError("subnets, security_groups: the installer runs in the VPC to reach the private endpoint")
        stack = Stack.of(self)
        logs_key = ClusterKey(self, "LogsKey", description=f"{source.release}: logs of its chart installer",
                              service_principals={f"logs.{stack.region}.amazonaws.com":
                                                  logs_key_conditions(stack.region, stack.account)})
        self.log_group = logs.LogGroup(self, "Logs", encryption_key=logs_key.key,
                                       retention=logs.RetentionDays.THREE_MONTHS, removal_policy=RemovalPolicy.DESTROY)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description=f"fmcluster: installs Helm release {source.release} from {source.repository}")
        self.role.add_managed_policy(
            iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole"))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="Logs", actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[f"{self.log_group.log_group_arn}:log-stream:*"]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="DescribeTheCluster", actions=["eks:DescribeCluster"], resources=[cluster.cluster_arn]))
        acknowledge(self.role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AWSLambdaVPCAccessExecutionRole]", "The chart installer runs in the VPC to reach the private API "
                    "endpoint: Lambda needs its documented VPC access policy to manage the function's ENIs.")
        acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{nag_resource(stack, self.log_group.log_group_arn)}:"
                    "log-stream:*]", "The chart installer writes log streams (one per Lambda instance) in its own log "
                    "group only.")
        self.function = lambda_.Function(
            self,
            "Function",
            description=f"fmcluster: Helm release {source.release} from {source.repository}@{source.commit[:12]}",
            runtime=lambda_.Runtime.PYTHON_3_14,  # the newest Python Lambda offers (cdk-nag AwsSolutions-L1)
            handler="index.handler",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            layers=[kubectl_layer],
            role=self.role,
            log_group=self.log_group,
            timeout=Duration.minutes(15),
            memory_size=1024,
            ephemeral_storage_size=Size.mebibytes(1024),
            environment={"AWS_STS_REGIONAL_ENDPOINTS": "regional"},
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=list(subnets)),
            security_groups=list(security_groups),
        )
        cfn_lint_ignore(self.function, ["W3005"], "CDK's Function declares DependsOn on its role as well as a GetAtt; "
                        "harmless")
        self.access = eks.AccessEntry(
            self, "Access", cluster=cluster, principal=self.role.role_arn,
            access_policies=[eks.AccessPolicy.from_access_policy_name(
                CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER)])
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": cluster.cluster_name,
                "ArchiveUrl": source.archive_url,
                "ChartPath": source.path,
                "TreeId": tree_id,
                "Release": source.release,
                "Namespace": source.namespace,
                "Values": json.dumps(values, sort_keys=True),
                **({"Namespaces": list(namespaces)} if namespaces else {}),
            },
        )
        # the role's policy and access entry before the first call; the function's ENIs before its first run
        self.resource.node.add_dependency(self.access)
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.resource.node.add_dependency(policy)

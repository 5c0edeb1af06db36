"""HyperPod's managed Karpenter for the spec's elastic node groups: the role HyperPod assumes to add and remove
instances, and per elastic group a HyperpodNodeClass (its instance group) and a Karpenter NodePool (its limit and
labels).

Facts used (SageMaker developer guide, "Autoscaling on SageMaker HyperPod EKS" and its pages):
- ``AutoScaling: {Mode: Enable, AutoScalerType: Karpenter}`` and ``ClusterRole`` on AWS::SageMaker::Cluster; it is
  built on continuous provisioning (``NodeProvisioningMode: Continuous``).
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-sagemaker-cluster-clusterautoscalingconfig.html
- the role trusts ``hyperpod.sagemaker.amazonaws.com`` and may call ``sagemaker:BatchAddClusterNodes`` and
  ``sagemaker:BatchDeleteClusterNodes`` ("Create an IAM role for HyperPod autoscaling with Karpenter").
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-iam.html
- ``HyperpodNodeClass`` (``karpenter.sagemaker.amazonaws.com/v1``) lists up to 10 pre-created instance groups, which
  start at 0 instances; a ``NodePool`` (``karpenter.sh/v1``) refers to it by ``nodeClassRef``.
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html
- autoscaling reports its own status, apart from the cluster's: DescribeCluster's ``AutoScaling.Status`` (InService,
  Failed, Creating, Deleting) and ``FailureMessage``. The Karpenter objects are applied once it is InService
  (`AutoscalingReady`, a custom resource that waits for it).
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterAutoScalingConfigOutput.html
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster.constructs.bucket_deployment import nag_resource
from fmcluster.constructs.kms import ClusterKey, logs_key_conditions
from fmcluster.nag import acknowledge, cfn_lint_ignore
from fmcluster.orchestrators.hyperpod_eks import nodes
from fmcluster.platforms.kubernetes import labels
from fmcluster.spec import ClusterSpec, NodeGroup

SERVICE_PRINCIPAL = "hyperpod.sagemaker.amazonaws.com"
SCALING_ACTIONS = ("sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes")
NODE_CLASS_API = "karpenter.sagemaker.amazonaws.com"
# An empty node leaves after this long; training nodes are never consolidated while a pod runs on them
# (consolidationPolicy WhenEmpty), so a job is not moved to pack nodes tighter.
EMPTY_NODE_GRACE = "10m"


WAITER_DIR = Path(__file__).resolve().parent / "autoscaling_waiter"
WAITER_TYPE = "Custom::HyperPodAutoscalingReady"


def elastic_groups(spec: ClusterSpec) -> List[NodeGroup]:
    return [g for g in spec.node_groups if g.elastic]


class AutoscalingRole(Construct):
    """The role HyperPod's Karpenter acts as (``ClusterRole``): add and remove nodes of this account's HyperPod
    clusters in this Region. The cluster's id is generated at creation and the cluster names this role, so the
    resource is the account's cluster ARN pattern rather than the cluster's own ARN (which would be a cycle)."""

    def __init__(self, scope: Construct, id: str, *, cluster_name: str) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal(SERVICE_PRINCIPAL),
            description=f"fmcluster: HyperPod autoscaling (Karpenter) adds and removes nodes of {cluster_name}")
        clusters = f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}:cluster/*"
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ScaleClusterNodes", actions=list(SCALING_ACTIONS), resources=[clusters]))
        acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{nag_resource(stack, clusters)}]",
                    "The HyperPod cluster's id is generated when it is created, and the cluster names this role, so "
                    "the two scaling actions are limited to this account's HyperPod clusters in this Region.")

    @property
    def role_arn(self) -> str:
        return self.role.role_arn


class AutoscalingReady(Construct):
    """A custom resource whose creation ends when the HyperPod cluster's autoscaling is InService (the handler in
    autoscaling_waiter/ polls DescribeCluster, handing over to a new run of itself before Lambda's 15 minutes run out,
    at most 50 minutes in all). Make what needs HyperPod's Karpenter depend on ``resource``.

    The function calls the SageMaker API only (no VPC); its role may describe this cluster, write its own
    KMS-encrypted log group and, through the function's resource policy, invoke the function again."""

    def __init__(self, scope: Construct, id: str, *, cluster_name: str, cluster_arn: str) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        logs_key = ClusterKey(self, "LogsKey", description=f"{cluster_name}: logs of its autoscaling waiter",
                              service_principals={f"logs.{stack.region}.amazonaws.com":
                                                  logs_key_conditions(stack.region, stack.account)})
        self.log_group = logs.LogGroup(self, "Logs", encryption_key=logs_key.key,
                                       retention=logs.RetentionDays.THREE_MONTHS, removal_policy=RemovalPolicy.DESTROY)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description=f"fmcluster: waits for the autoscaling of HyperPod cluster {cluster_name}")
        self.role.add_to_policy(iam.PolicyStatement(
            sid="Logs", actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[f"{self.log_group.log_group_arn}:log-stream:*"]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="DescribeTheCluster", actions=["sagemaker:DescribeCluster"], resources=[cluster_arn]))
        acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{nag_resource(stack, self.log_group.log_group_arn)}:"
                    "log-stream:*]", "The waiter writes log streams (one per Lambda instance) in its own log group only.")
        self.function = lambda_.Function(
            self, "Function",
            description=f"fmcluster: waits until HyperPod cluster {cluster_name}'s autoscaling is InService",
            runtime=lambda_.Runtime.PYTHON_3_14,  # the newest Python Lambda offers (cdk-nag AwsSolutions-L1)
            handler="index.handler",
            code=lambda_.Code.from_asset(str(WAITER_DIR), exclude=["__pycache__", "*.pyc"]),
            role=self.role, log_group=self.log_group, timeout=Duration.minutes(15), memory_size=128)
        cfn_lint_ignore(self.function, ["W3005"], "CDK's Function declares DependsOn on its role as well as a GetAtt; "
                        "harmless")
        # the run that hands over invokes the function again: allowed by the function's resource policy (an identity
        # policy naming the function would be a dependency cycle: the function depends on its role's policy)
        permission = lambda_.CfnPermission(self, "HandOver", action="lambda:InvokeFunction",
                                           function_name=self.function.function_arn, principal=self.role.role_arn)
        self.resource = CustomResource(self, "Resource", service_token=self.function.function_arn,
                                       resource_type=WAITER_TYPE, properties={"ClusterName": cluster_name})
        self.resource.node.add_dependency(permission)
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.resource.node.add_dependency(policy)


def node_class(group: NodeGroup) -> Dict[str, Any]:
    return {"apiVersion": f"{NODE_CLASS_API}/v1", "kind": "HyperpodNodeClass",
            "metadata": {"name": group.name}, "spec": {"instanceGroups": [group.name]}}


def node_pool(spec: ClusterSpec, group: NodeGroup) -> Dict[str, Any]:
    """Karpenter's NodePool for one elastic group: nodes of its instance group only, with the group's labels (jobs
    select them) and the validation gate's taint as a startup taint (the gate removes it; pods need not tolerate it),
    limited to max_count nodes' worth of GPUs (CPUs for a CPU group)."""
    t = group.instance
    limit = {labels.GPU_RESOURCE: str((t.gpus or 0) * group.max_size)} if t.is_gpu else \
        {"cpu": str(t.vcpus * group.max_size)}
    template: Dict[str, Any] = {
        "nodeClassRef": {"group": NODE_CLASS_API, "kind": "HyperpodNodeClass", "name": group.name},
        "expireAfter": "Never",
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "Exists"}],
    }
    startup = nodes.node_taints(spec, group)
    if startup:
        template["startupTaints"] = startup
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": group.name},
        "spec": {
            "template": {"metadata": {"labels": nodes.node_labels(group)}, "spec": template},
            "limits": limit,
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": EMPTY_NODE_GRACE},
        },
    }


def karpenter_objects(spec: ClusterSpec) -> List[Dict[str, Any]]:
    """Every elastic group's node class, then its node pool."""
    return [node_class(g) for g in elastic_groups(spec)] + [node_pool(spec, g) for g in elastic_groups(spec)]

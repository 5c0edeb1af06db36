"""Cluster Autoscaler for elastic EKS managed node groups: its chart values (GPU-training settings), its IAM policy
(scaling actions limited by tag to this cluster's node groups' Auto Scaling groups) and the node-template tags a
managed node group carries so that the autoscaler can scale it up from zero. docs/resilience.md says why Cluster
Autoscaler and not Karpenter; cluster-autoscaler/cloudprovider/aws/README.md (kubernetes/autoscaler) is the source
of every flag, tag and permission used here."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from fmcluster.platforms.kubernetes import labels
from fmcluster.platforms.kubernetes.versions import CLUSTER_AUTOSCALER_IMAGE, CLUSTER_AUTOSCALER_TAGS
from fmcluster.spec import NodeGroup

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"
# Managed nodes are "automatically tagged for auto-discovery by the Kubernetes cluster autoscaler" (EKS user guide,
# "Managed node groups"); these two keys are the ones the AWS provider README's auto-discovery and the chart's default
# autoDiscovery.tags use (that EKS sets exactly these: unverified, docs/resilience.md).
ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"

# Read-only calls the AWS provider makes to build node templates and follow scaling; the Describe/List APIs of Auto
# Scaling and EC2 do not support resource-level permissions (Service Authorization Reference: no resource type for
# them), so their resource is "*". ec2:GetInstanceTypesFromInstanceRequirements (attribute-based instance selection)
# and autoscaling:DescribeLaunchConfigurations (launch configurations) are left out: fmcluster's groups use neither.
DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
)
SCALING_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")

# GPU nodes leave only when empty: a node is a scale-down candidate when the GPUs its pods request, over its
# allocatable GPUs, fall below this (--scale-down-gpu-utilization-threshold; utils/gpu NodeHasGpu makes the GPU
# figure the one used for nodes with nvidia.com/gpu). One GPU of 8 is 0.125, so any GPU pod keeps its node.
GPU_EMPTY_THRESHOLD = "0.01"


def cluster_tag(cluster_name: str) -> str:
    return f"k8s.io/cluster-autoscaler/{cluster_name}"


def elastic_groups(groups: Sequence[NodeGroup]) -> List[NodeGroup]:
    return [g for g in groups if g.elastic]


def node_template_tags(group: NodeGroup, *, efa_device: str) -> Dict[str, str]:
    """Tags on the managed node group (not its Auto Scaling group, which EKS does not tag from the node group) that
    tell the autoscaler what a node it has not seen yet offers: the GPUs and, with the EFA device plugin, the EFA
    interfaces as extended resources. Cluster Autoscaler reads a managed node group's tags through
    eks:DescribeNodegroup for resources (cloudprovider/aws/aws_manager.go buildNodeFromTemplate), and its labels and
    taints from the node group's own labels and taints, which fmcluster sets."""
    tags: Dict[str, str] = {}
    if group.instance.is_gpu:
        tags[f"{NODE_TEMPLATE}/resources/{labels.GPU_RESOURCE}"] = str(group.instance.gpus)
    if labels.efa_device_of(group, efa_device) == "plugin":
        tags[f"{NODE_TEMPLATE}/resources/{labels.EFA_RESOURCE}"] = str(group.instance.efa_interfaces)
    return tags


def chart_values(*, cluster_name: str, region: str, kubernetes_version: str,
                 system_selector: Mapping[str, str]) -> Dict[str, Any]:
    """The cluster-autoscaler chart's values: auto-discovery by this cluster's tags, on the system nodes, at the image
    of the cluster's Kubernetes minor, with settings for gang-scheduled GPU training (docs/resilience.md)."""
    if kubernetes_version not in CLUSTER_AUTOSCALER_TAGS:
        raise ValueError(f"kubernetes_version: {kubernetes_version!r} has no pinned Cluster Autoscaler "
                         f"({', '.join(CLUSTER_AUTOSCALER_TAGS)})")
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name, "tags": [ENABLED_TAG, cluster_tag(cluster_name)]},
        "image": {"repository": CLUSTER_AUTOSCALER_IMAGE, "tag": CLUSTER_AUTOSCALER_TAGS[kubernetes_version]},
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "nodeSelector": dict(system_selector),
        "replicaCount": 1,
        "extraArgs": {
            "logtostderr": True,
            "stderrthreshold": "info",
            "v": 2,
            # each group is one placement group: spreading a job's nodes over groups would split its fabric
            "balance-similar-node-groups": False,
            # the group that leaves the least idle CPU and memory (the default, written down)
            "expander": "least-waste",
            "scale-down-gpu-utilization-threshold": GPU_EMPTY_THRESHOLD,
            # a pod with emptyDir or hostPath data (local checkpoints on the instance NVMe) keeps its node
            "skip-nodes-with-local-storage": True,
            # pods of job controllers (Kubeflow, JobSet) keep their nodes
            "skip-nodes-with-custom-controller-pods": True,
            # the validation gate's taint is on every new node and removed once its boot validation passes: not a
            # reason to think the group cannot run a pending pod (--startup-taint)
            "startup-taint": labels.VALIDATION_TAINT_KEY,
            # A node whose validation failed keeps that taint (value "failed"), and the autoscaler "treats nodes
            # tainted with startup taints as unready": by default it would delete such a node once unneeded and start
            # another for the pending pods, relaunching GPU instances without end on a failure the image repeats.
            # Under policy taint a failed node stays, with its reason, until someone acts (docs/eks.md, "The validation gate").
            "scale-down-unready-enabled": False,
        },
    }


def scaling_resource(stack: Stack) -> str:
    """This account's Auto Scaling groups in this Region (EKS names a node group's group at creation)."""
    return f"arn:{stack.partition}:autoscaling:{stack.region}:{stack.account}:autoScalingGroup:*:autoScalingGroupName/*"


def nodegroup_resource(stack: Stack, cluster_name: str) -> str:
    """This cluster's managed node groups (arn:...:nodegroup/CLUSTER/NAME/ID, the id generated by EKS)."""
    return f"arn:{stack.partition}:eks:{stack.region}:{stack.account}:nodegroup/{cluster_name}/*/*"


def policy_statements(stack: Stack, *, cluster_name: str) -> List[iam.PolicyStatement]:
    """Least privilege for the autoscaler: the two scaling actions on this account's Auto Scaling groups in this
    Region only when the group carries both auto-discovery tags of this cluster; eks:DescribeNodegroup on this
    cluster's node groups; the read-only Describe calls (no resource-level permissions) on "*"."""
    groups = scaling_resource(stack)
    nodegroups = nodegroup_resource(stack, cluster_name)
    return [
        iam.PolicyStatement(sid="ScaleThisClustersGroups", actions=list(SCALING_ACTIONS), resources=[groups],
                            conditions={"Null": {f"aws:ResourceTag/{ENABLED_TAG}": "false",
                                                 f"aws:ResourceTag/{cluster_tag(cluster_name)}": "false"}}),
        iam.PolicyStatement(sid="DescribeThisClustersNodegroups", actions=["eks:DescribeNodegroup"],
                            resources=[nodegroups]),
        iam.PolicyStatement(sid="DescribeScalingState", actions=list(DESCRIBE_ACTIONS), resources=["*"]),
    ]

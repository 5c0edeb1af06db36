"""SageMaker HyperPod with Amazon EKS orchestration: the eks kind's control plane and Kubernetes layers (add-ons,
exporters, the AMP managed scraper, the shared file system's claims, the node gate) and the hyperpod kind's HyperPod
parts (instance role, lifecycle bucket, instance groups, health checks), plus what HyperPod on EKS needs before its
cluster exists (its dependency Helm chart, task governance) and task governance from the spec. docs/hyperpod-eks.md
says how and why."""

from __future__ import annotations

from fmcluster.orchestrators.eks import POD_ADDRESSES_PER_NODE
from fmcluster.orchestrators.hyperpod_eks import settings
from fmcluster.orchestrators.kind import OrchestratorKind

KIND = OrchestratorKind(
    name="hyperpod-eks",
    summary="SageMaker HyperPod on Amazon EKS with health checks, node recovery and task governance",
    settings=settings.HyperPodEksOrchestrator,
    node_agent="kubernetes",
    # HyperPod reserves capacity through SageMaker training plans, not EC2 reservations
    capacity_types=frozenset({"on-demand", "training-plan"}),
    construct="fmcluster.orchestrators.hyperpod_eks.construct:HyperPodEksOrchestration",
    construct_id="HyperPodEks",
    instances_in_account=False,
    uses_image_family=False,  # HyperPod runs its own EKS AMI
    spec_rules=settings.spec_rules,
    extra_instances=settings.extra_instances,
    extra_availability_zones=settings.extra_availability_zones,
    # pods take VPC addresses on the instance's one ENI, as on EKS managed nodes (same VPC CNI settings)
    addresses_per_node=POD_ADDRESSES_PER_NODE,
    preflight="fmcluster.orchestrators.hyperpod_eks.preflight:checks",
    status="fmcluster.orchestrators.hyperpod_eks.status:DESCRIBERS",
    plan_notes=settings.plan_notes,
    rule_groups=("hyperpod",),
    validation_policies=settings.POLICIES,
    validation_policy_note="drain is Slurm's. taint: the node gate keeps a failed node out of work, with the reason; "
    "fail: the lifecycle script fails and HyperPod provisions another instance",
)

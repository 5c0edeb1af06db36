"""SageMaker HyperPod: resilient clusters HyperPod launches, places and heals. Slurm now; EKS next, sharing
the instance role, lifecycle bucket, instance groups and health checks."""

from __future__ import annotations

from fmcluster.orchestrators.hyperpod import settings
from fmcluster.orchestrators.kind import OrchestratorKind

SLURM = OrchestratorKind(
    name="hyperpod-slurm",
    summary="SageMaker HyperPod with Slurm",
    settings=settings.HyperPodSlurmOrchestrator,
    node_agent="slurm",
    # HyperPod reserves capacity through SageMaker training plans, not EC2 reservations
    capacity_types=frozenset({"on-demand", "training-plan"}),
    construct="fmcluster.orchestrators.hyperpod.construct:HyperPodSlurmOrchestration",
    construct_id="HyperPod",
    instances_in_account=False,
    uses_image_family=False,
    spec_rules=settings.spec_rules,
    extra_instances=settings.extra_instances,
    preflight="fmcluster.orchestrators.hyperpod.preflight:checks",
    status="fmcluster.orchestrators.hyperpod.status:DESCRIBERS",
    validation_policy_note="taint is Kubernetes': drain keeps a failed node out of Slurm, with the reason",
)

"""AWS Parallel Computing Service: a managed Slurm controller; our EFA launch templates start the nodes."""

from __future__ import annotations

from fmcluster.orchestrators.kind import OrchestratorKind
from fmcluster.orchestrators.pcs import settings

KIND = OrchestratorKind(
    name="pcs",
    summary="AWS Parallel Computing Service (Slurm)",
    settings=settings.PcsOrchestrator,
    node_agent="slurm",
    capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
    construct="fmcluster.orchestrators.pcs.construct:PcsOrchestration",
    spec_rules=settings.spec_rules,
    extra_instances=settings.extra_instances,
    preflight="fmcluster.orchestrators.pcs.preflight:checks",
    status="fmcluster.orchestrators.pcs.status:DESCRIBERS",
    validation_policy_note="taint is Kubernetes': drain keeps a failed node out of Slurm, with the reason",
)

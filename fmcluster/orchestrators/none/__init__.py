"""No orchestrator: plain EC2 launch templates (and placement groups) per node group for your own scheduler."""

from __future__ import annotations

from fmcluster.orchestrators.kind import OrchestratorKind
from fmcluster.orchestrators.none.settings import NoOrchestrator

KIND = OrchestratorKind(
    name="none",
    summary="network, placement groups and launch templates only (bring your own scheduler)",
    settings=NoOrchestrator,
    node_agent=None,
    capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
    construct="fmcluster.orchestrators.ec2_nodes:Ec2Nodes",
    validation_policies=("report", "fail"),
    validation_policy_note="no scheduler runs here to drain or taint the node from",
)

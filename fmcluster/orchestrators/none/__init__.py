"""No orchestrator: plain EC2 launch templates (and placement groups) per node group for your own scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fmcluster.orchestrators.kind import OrchestratorKind
from fmcluster.orchestrators.none.settings import NoOrchestrator

if TYPE_CHECKING:
    from constructs import Construct

    from fmcluster.orchestrators.context import Orchestration, OrchestrationContext


class NoOrchestratorKind(OrchestratorKind[NoOrchestrator]):
    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        from fmcluster.orchestrators.context import Orchestration
        from fmcluster.platforms.ec2.nodes import Ec2Nodes

        nodes = Ec2Nodes(scope, "Default", context=context)
        return Orchestration(nodes, nodes.grantee, nodes.node_groups)


KIND = NoOrchestratorKind(
    name="none",
    summary="network, placement groups and launch templates only (bring your own scheduler)",
    settings=NoOrchestrator,
    node_agent=None,
    capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
    validation_policies=("report", "fail"),
    validation_policy_note="no scheduler runs here to drain, taint or replace the node from",
    elastic_note="no scheduler or scaler runs here to start and stop nodes (fmcluster creates launch templates only): "
    "size the group with count and scale with your own scheduler",
)

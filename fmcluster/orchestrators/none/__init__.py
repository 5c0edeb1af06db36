"""No orchestrator: plain EC2 launch templates (and placement groups) per node group for your own scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING, List

from fmcluster.orchestrators.kind import NodeTraits, OrchestratorKind, ValidationTraits
from fmcluster.orchestrators.none.settings import NoOrchestrator

if TYPE_CHECKING:
    from constructs import Construct

    from fmcluster.orchestrators.context import Orchestration, OrchestrationContext
    from fmcluster.spec.cluster import ClusterSpec


class NoOrchestratorKind(OrchestratorKind[NoOrchestrator]):
    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        from aws_cdk import CfnOutput

        from fmcluster.orchestrators.context import Orchestration
        from fmcluster.platforms.ec2.nodes import Ec2Nodes

        nodes = Ec2Nodes(scope, "Default", spec=context.spec, node_builder=context.node_builder)
        CfnOutput(scope, "SessionCommand", value=self.way_in(context.spec)[-1],
                  description="A shell on a running instance launched from the first group's launch template")
        return Orchestration(nodes, nodes.grantee, nodes.node_groups)

    def way_in(self, spec: ClusterSpec) -> List[str]:
        from fmcluster.platforms.ec2.access import session_command

        group = spec.node_groups[0].name
        return [f"# launch instances from node group {group}'s LaunchTemplateId output (EC2 or your scheduler), then:",
                session_command(region=spec.region, cluster=spec.name, group=group)]


KIND = NoOrchestratorKind(
    name="none",
    summary="network, placement groups and launch templates only (bring your own scheduler)",
    settings=NoOrchestrator,
    nodes=NodeTraits(
        agent=None,
        capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
        elastic_note="no scheduler or scaler runs here to start and stop nodes (fmcluster creates launch templates only): "
        "size the group with count and scale with your own scheduler",
    ),
    validation=ValidationTraits(
        policies=("report", "fail"),
        policy_note="no scheduler runs here to drain, taint or replace the node from",
    ),
)

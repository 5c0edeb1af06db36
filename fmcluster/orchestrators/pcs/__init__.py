"""AWS Parallel Computing Service: a managed Slurm controller; our EFA launch templates start the nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping

from fmcluster.orchestrators.kind import (
    BilledService,
    ExtraInstance,
    NodeTraits,
    OrchestratorKind,
    Scaffold,
    ValidationTraits,
)
from fmcluster.orchestrators.pcs import settings
from fmcluster.spec.orchestrator import DLAMI_NCCL_TESTS, DLAMI_SOURCE, JobImage

if TYPE_CHECKING:
    from constructs import Construct

    from fmcluster.aws.context import PreflightCheck
    from fmcluster.aws.status import Describer
    from fmcluster.orchestrators.context import Orchestration, OrchestrationContext
    from fmcluster.spec.base import Problem
    from fmcluster.spec.cluster import ClusterSpec
    from fmcluster.spec.node_units import NodeUnit, Resources


CONTROLLER_PRICE = "pcs-controller"  # the PCS controller's price key in the planner's data


class Pcs(OrchestratorKind[settings.PcsOrchestrator]):
    def spec_rules(self, spec: ClusterSpec) -> List[Problem]:
        return settings.spec_rules(spec)

    def extra_instances(self, spec: ClusterSpec) -> List[ExtraInstance]:
        return settings.extra_instances(spec)

    def billed_services(self, spec: ClusterSpec) -> List[BilledService]:
        size = self.settings_of(spec).size_for(settings.instances(spec))
        return [BilledService(CONTROLLER_PRICE, f"1 cluster, size {size}")]

    def scaffold(self, request: Scaffold) -> Dict[str, Any]:
        if not request.ami_id:
            raise ValueError("--ami-id: PCS nodes boot an AMI with the PCS agent and PCS's Slurm, which you build "
                             "(README, 'PCS AMI'); name it with --ami-id ami-...")
        return {"type": self.name}

    def way_in(self, spec: ClusterSpec) -> List[str]:
        from fmcluster.platforms.ec2.access import session_command
        from fmcluster.platforms.ec2.node_builder import LOGIN_NODE_GROUP

        return ["# the login node (sbatch, squeue, sinfo), through Session Manager:",
                session_command(region=spec.region, cluster=spec.name, group=LOGIN_NODE_GROUP)]

    def node_units(self, stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
        from fmcluster.orchestrators.pcs.node_units import node_units

        return node_units(stack, logical_id, resource, resources)

    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        from fmcluster.orchestrators.context import Orchestration
        from fmcluster.orchestrators.pcs.construct import PcsOrchestration

        pcs = PcsOrchestration(scope, "Default", context=context)
        return Orchestration(pcs, pcs.grantee, pcs.node_groups)

    def preflight_checks(self, spec: ClusterSpec) -> List[PreflightCheck]:
        from fmcluster.orchestrators.pcs.preflight import checks

        return checks(spec)

    def status_describers(self) -> Mapping[str, Describer]:
        from fmcluster.orchestrators.pcs.status import DESCRIBERS

        return DESCRIBERS


KIND = Pcs(
    name="pcs",
    summary="AWS Parallel Computing Service (Slurm)",
    settings=settings.PcsOrchestrator,
    nodes=NodeTraits(
        resource_types=("AWS::PCS::ComputeNodeGroup",),  # fmcluster diff reads its nodes there
        agent="slurm",
        capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
        elastic=True,  # compute node group scaling: min static instances, up to max started for jobs
    ),
    validation=ValidationTraits(
        policy_note="taint is Kubernetes': drain keeps a failed node out of Slurm, with the reason. replace is "
        "HyperPod's: PCS documents no Slurm reason or state that replaces an instance (its own health monitoring replaces "
        "faulty instances: docs/resilience.md)",
    ),
    price_keys=frozenset({CONTROLLER_PRICE}),
    # every group's ami_id: an image built from the Deep Learning AMI with the PCS agent (README, "PCS AMI")
    job_image=JobImage(name="the PCS AMI built from the Deep Learning Base OSS NVIDIA Driver GPU AMI",
                       nccl_tests=DLAMI_NCCL_TESTS, source=DLAMI_SOURCE),
)

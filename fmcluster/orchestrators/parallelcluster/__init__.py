"""AWS ParallelCluster 3 (Slurm) deployed by `cdk deploy`: ParallelCluster's CloudFormation provider (a nested
stack) and a `Custom::PclusterCluster` whose configuration the spec renders, on fmcluster's network, storage and
observability stacks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping

from fmcluster.orchestrators.kind import (
    ExtraInstance,
    NodeTraits,
    OrchestratorKind,
    SpecWarning,
    StorageTraits,
    ValidationTraits,
)
from fmcluster.orchestrators.parallelcluster import settings
from fmcluster.spec.orchestrator import JobImage

if TYPE_CHECKING:
    from constructs import Construct

    from fmcluster.aws.context import PreflightCheck
    from fmcluster.aws.status import Describer
    from fmcluster.orchestrators.context import Orchestration, OrchestrationContext
    from fmcluster.spec.base import Problem
    from fmcluster.spec.cluster import ClusterSpec
    from fmcluster.spec.node_group import NodeGroup
    from fmcluster.spec.node_units import NodeUnit, Resources


# ParallelCluster keeps Slurm accounting only in a MySQL-compatible database it is given (SlurmSettings/Database, or an
# external slurmdbd), "Slurm accounting with AWS ParallelCluster"
ACCOUNTING_GUIDE = "https://docs.aws.amazon.com/parallelcluster/latest/ug/slurm-accounting-v3.html"


class ParallelCluster(OrchestratorKind[settings.ParallelClusterOrchestrator]):
    def plan_notes(self, spec: ClusterSpec) -> List[str]:
        return [f"Slurm accounting (sacct) is off: ParallelCluster keeps it only in a MySQL-compatible database given "
                f"as SlurmSettings/Database or an external slurmdbd ({ACCOUNTING_GUIDE}), which fmcluster does not "
                "create (docs/parallelcluster.md)"]

    def way_in(self, spec: ClusterSpec) -> List[str]:
        head = (f"aws cloudformation describe-stacks --region {spec.region} --stack-name {spec.stack_name('cluster')} --query "
                "\"Stacks[0].Outputs[?OutputKey=='HeadNodeInstanceId'].OutputValue\" --output text")
        return ["# the head node (sbatch, squeue, sinfo; pcluster commands from your machine), through Session Manager:",
                f"aws ssm start-session --region {spec.region} --target $({head})"]

    def spec_rules(self, spec: ClusterSpec) -> List[Problem]:
        return settings.spec_rules(spec)

    def spec_warnings(self, spec: ClusterSpec) -> List[SpecWarning]:
        return settings.spec_warnings(spec)

    def extra_instances(self, spec: ClusterSpec) -> List[ExtraInstance]:
        return settings.extra_instances(spec)

    def expected_nodes(self, spec: ClusterSpec) -> Dict[str, int]:
        return settings.static_nodes(spec)  # dynamic nodes power off when idle: only static ones always report

    def node_units(self, stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
        from fmcluster.orchestrators.parallelcluster.node_units import node_units

        return node_units(stack, logical_id, resource, resources)

    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        from fmcluster.orchestrators.context import Orchestration
        from fmcluster.orchestrators.parallelcluster.construct import ParallelClusterOrchestration

        pcluster = ParallelClusterOrchestration(scope, "ParallelCluster", context=context)
        return Orchestration(pcluster, pcluster.grantee)

    def node_profile_json(self, spec: ClusterSpec, group: NodeGroup) -> str:
        from fmcluster.orchestrators.parallelcluster.construct import node_profile_json

        return node_profile_json(spec, group)

    def preflight_checks(self, spec: ClusterSpec) -> List[PreflightCheck]:
        from fmcluster.orchestrators.parallelcluster.preflight import checks

        return checks(spec)

    def status_describers(self) -> Mapping[str, Describer]:
        from fmcluster.orchestrators.parallelcluster.status import DESCRIBERS

        return DESCRIBERS


KIND = ParallelCluster(
    name="parallelcluster",
    summary=f"AWS ParallelCluster {settings.PCLUSTER_VERSION} (Slurm) through its CloudFormation provider",
    settings=settings.ParallelClusterOrchestrator,
    nodes=NodeTraits(
        resource_types=("Custom::PclusterCluster",),  # fmcluster diff reads its nodes there
        agent="slurm",
        # CAPACITY_BLOCK queues take Capacity Blocks; ODCRs are an ONDEMAND queue's CapacityReservationTarget
        capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
        elastic=True,  # MinCount static nodes, up to MaxCount dynamic nodes Slurm starts for jobs
        image_family=False,  # ParallelCluster picks the image from its Image.Os (or the group's ami_id)
    ),
    validation=ValidationTraits(
        policies=settings.POLICIES,
        policy_note="taint is Kubernetes'; drain would loop: clustermgtd terminates a drained static node and "
        "launches a replacement, which fails and drains again, and the bootstrap succeeded, so protected mode never "
        "stops it. fail: the bootstrap fails and ParallelCluster replaces the node until protected mode stops the queue; "
        "report: the node joins Slurm, its report and metrics say why it failed. replace is HyperPod's; fail is "
        "ParallelCluster's replacement",
    ),
    storage=StorageTraits(
        # its SharedStorage section, or the nodes run the store's boot lines from their custom actions (mounts.py)
        mount_forms=(frozenset({"parallelcluster"}), frozenset({"boot"})),
    ),
    # The official AMI has CUDA, the EFA installer (Open MPI, aws-ofi-nccl) and no NCCL (docs/parallelcluster.md, "Node
    # software on the official AMI"); the head node shares /home with every node (HeadNode/SharedStorageType)
    job_image=JobImage(name=f"the official ParallelCluster {settings.PCLUSTER_VERSION} AMI", nccl_tests="",
                       shared_home=True,
                       source="https://docs.aws.amazon.com/parallelcluster/latest/ug/HeadNode-v3.html"),
)

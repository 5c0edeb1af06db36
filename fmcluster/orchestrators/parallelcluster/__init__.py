"""AWS ParallelCluster 3 (Slurm) deployed by `cdk deploy`: ParallelCluster's CloudFormation provider (a nested
stack) and a `Custom::PclusterCluster` whose configuration the spec renders, on fmcluster's network, storage and
observability stacks."""

from __future__ import annotations

from fmcluster.orchestrators.kind import OrchestratorKind
from fmcluster.orchestrators.parallelcluster import settings

KIND = OrchestratorKind(
    name="parallelcluster",
    summary=f"AWS ParallelCluster {settings.PCLUSTER_VERSION} (Slurm) through its CloudFormation provider",
    settings=settings.ParallelClusterOrchestrator,
    node_agent="slurm",
    # CAPACITY_BLOCK queues take Capacity Blocks; ODCRs are an ONDEMAND queue's CapacityReservationTarget
    capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
    construct="fmcluster.orchestrators.parallelcluster.construct:ParallelClusterOrchestration",
    construct_id="ParallelCluster",
    uses_image_family=False,  # ParallelCluster picks the image from its Image.Os (or the group's ami_id)
    spec_rules=settings.spec_rules,
    extra_instances=settings.extra_instances,
    expected_nodes=settings.static_nodes,  # dynamic nodes power off when idle: only static ones always report
    preflight="fmcluster.orchestrators.parallelcluster.preflight:checks",
    status="fmcluster.orchestrators.parallelcluster.status:DESCRIBERS",
    validation_policies=settings.POLICIES,
    validation_policy_note="taint is Kubernetes'; drain would loop: clustermgtd terminates a drained static node and "
    "launches a replacement, which fails and drains again, and the bootstrap succeeded, so protected mode never "
    "stops it. fail: the bootstrap fails and ParallelCluster replaces the node until protected mode stops the queue; "
    "report: the node joins Slurm, its report and metrics say why it failed",
)

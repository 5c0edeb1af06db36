"""Amazon EKS: a private control plane, GPU managed node groups launched from the EFA launch templates, device
plugins, Kueue (or Volcano / KAI) for gang and topology-aware scheduling, FSx as a PersistentVolume, and a node
gate that keeps a node tainted until its boot validation passes. docs/eks.md says how and why."""

from __future__ import annotations

from fmcluster.orchestrators.eks import settings
from fmcluster.orchestrators.kind import OrchestratorKind

# Pod addresses per node under the VPC CNI, which the node subnet must hold beside the nodes' own interfaces: the
# add-on keeps MINIMUM_IP_TARGET (16) addresses per node plus a WARM_IP_TARGET (4) margin (charts.py sets both).
POD_ADDRESSES_PER_NODE = 24

KIND = OrchestratorKind(
    name="eks",
    summary="Amazon EKS with GPU managed node groups, Kueue (or Volcano/KAI) and a boot-validation node gate",
    settings=settings.EksOrchestrator,
    node_agent="kubernetes",
    capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
    construct="fmcluster.orchestrators.eks.construct:EksOrchestration",
    construct_id="Eks",
    uses_image_family=False,  # EKS picks the AL2023 NVIDIA AMI from the node group's AMI type
    spec_rules=settings.spec_rules,
    extra_instances=settings.extra_instances,
    extra_availability_zones=settings.extra_availability_zones,
    addresses_per_node=POD_ADDRESSES_PER_NODE,
    preflight="fmcluster.orchestrators.eks.preflight:checks",
    status="fmcluster.orchestrators.eks.status:DESCRIBERS",
    validation_policies=settings.POLICIES,
    validation_policy_note="drain is Slurm's, and fail cannot stop provisioning: EKS joins a node whatever its user "
    "data returns. taint: the node gate keeps a failed node tainted, with the reason",
)

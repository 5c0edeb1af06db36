"""`orchestrator: {type: eks, eks: {...}}`: Amazon EKS with GPU managed node groups, and the rules a spec must meet
for it. Field paths in problems are from the spec's top (``orchestrator.eks.kubernetes_version``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Literal

from pydantic import Field, field_validator

from fmcluster import catalog
from fmcluster.platforms.kubernetes.settings import (
    NAMESPACE_PATTERN,
    SYSTEM_GROUP,
    EksControlPlaneSettings,
    KueueSettings,
    control_plane_rules,
    network_rules,
)
from fmcluster.platforms.kubernetes.versions import (
    DEFAULT_KUBERNETES_VERSION,
    DRA_MIN_KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
    minor,
)
from fmcluster.spec.base import Problem, SpecModel
from fmcluster.spec.orchestrator import ExtraInstance, OrchestratorSettings

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

SCHEDULERS = ("kueue", "volcano", "kai")
SCHEDULER_NAMES = {"kueue": "Kueue", "volcano": "Volcano", "kai": "KAI Scheduler"}  # as their projects write them
EFA_DEVICES = ("plugin", "dra")
# The node-side validation policies a managed node group can honour: EKS joins a node whatever its user data returns,
# so "fail" cannot stop provisioning, and "drain" is Slurm's.
POLICIES = ("taint", "report")


class SystemNodes(SpecModel):
    """A small CPU managed node group for cluster services (CoreDNS, Kueue, CSI controllers): GPU nodes are tainted."""

    instance_type: str = Field("m6i.2xlarge", description="CPU instance type of the system nodes.")
    count: int = Field(2, ge=1, le=10, description="System nodes (two keep CoreDNS and controllers available).")

    @field_validator("instance_type")
    @classmethod
    def _type(cls, v: str) -> str:
        if v not in catalog.cpu_types():
            raise ValueError(f"unknown CPU instance type {v!r}; allowed: {', '.join(catalog.cpu_types())}")
        return v


class EksSettings(EksControlPlaneSettings):
    """Amazon EKS: control plane, access, device plugins and the scheduler for distributed training."""

    system_nodes: SystemNodes = Field(default_factory=SystemNodes)
    efa_device: str = Field(
        "plugin", description="plugin: the EFA device plugin (vpc.amazonaws.com/efa); dra: the EFA DRA driver "
                              f"(Kubernetes >= {DRA_MIN_KUBERNETES_VERSION}). Never both on a node.")
    scheduler: str = Field("kueue", description=f"Scheduling for distributed training: {', '.join(SCHEDULERS)}.")
    kueue: KueueSettings = Field(default_factory=KueueSettings)
    training_namespace: str = Field("training", pattern=NAMESPACE_PATTERN,
                                    description="Namespace of the training queue and the shared file system's claim.")

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v not in KUBERNETES_VERSIONS:
            raise ValueError(f"Kubernetes {v} is outside the supported range {KUBERNETES_VERSIONS[0]}-"
                             f"{KUBERNETES_VERSIONS[-1]}; choose one of {', '.join(KUBERNETES_VERSIONS)} (default "
                             f"{DEFAULT_KUBERNETES_VERSION}: the newest both EKS and SageMaker HyperPod on EKS support)")
        return v

    @field_validator("scheduler")
    @classmethod
    def _scheduler(cls, v: str) -> str:
        if v not in SCHEDULERS:
            raise ValueError(f"scheduler {v!r} is not offered; choose {', '.join(SCHEDULERS)}")
        return v

    @field_validator("efa_device")
    @classmethod
    def _efa_device(cls, v: str) -> str:
        if v not in EFA_DEVICES:
            raise ValueError(f"{v!r} is not plugin (EFA device plugin) or dra (EFA DRA driver)")
        return v


class EksOrchestrator(OrchestratorSettings):
    type: Literal["eks"] = "eks"
    eks: EksSettings


def extra_instances(spec: ClusterSpec) -> List[ExtraInstance]:
    system = EksOrchestrator.of(spec).eks.system_nodes
    return [ExtraInstance(SYSTEM_GROUP, system.instance_type, system.count)]


def spec_rules(spec: ClusterSpec) -> List[Problem]:
    s = EksOrchestrator.of(spec).eks
    found: List[Problem] = []
    at = "orchestrator.eks"
    if s.efa_device == "dra" and minor(s.kubernetes_version) < minor(DRA_MIN_KUBERNETES_VERSION):
        found.append((f"{at}.efa_device", f"the EFA DRA driver needs Kubernetes >= {DRA_MIN_KUBERNETES_VERSION}; the "
                      f"cluster runs {s.kubernetes_version}: use plugin or a newer kubernetes_version"))
    found += control_plane_rules(spec)
    if spec.validation.level == "deep":
        found.append(("validation.level", "the deep checks run host tools (DCGM diagnostics, nccl-tests, fi_pingpong) "
                      "the EKS AMI does not carry; use standard, and run deep tests as jobs"))
    found += network_rules(spec)
    for i, g in enumerate(spec.node_groups):
        if g.name == SYSTEM_GROUP:
            found.append((f"node_groups[{i}].name", f"{SYSTEM_GROUP!r} is the EKS system node group; pick another"))
        if g.ami_id:
            found.append((f"node_groups[{i}].ami_id", "EKS managed node groups run the EKS-optimized Amazon Linux 2023 "
                          "(NVIDIA) AMI of the cluster version, chosen by AMI type; remove ami_id"))
    return found



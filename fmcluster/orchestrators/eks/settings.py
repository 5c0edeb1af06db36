"""`orchestrator: {type: eks, eks: {...}}`: Amazon EKS with GPU managed node groups, and the rules a spec must meet
for it. Field paths in problems are from the spec's top (``orchestrator.eks.kubernetes_version``)."""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, List, Literal, Optional

from pydantic import Field, field_validator

from fmcluster import catalog
from fmcluster.orchestrators.eks.versions import (
    DEFAULT_KUBERNETES_VERSION,
    DRA_MIN_KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
    minor,
)
from fmcluster.orchestrators.kind import ExtraInstance, OrchestratorSettings
from fmcluster.spec.base import Problem, SpecModel

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

# Access entries take IAM roles and users (not STS assumed-role session ARNs) (EKS user guide, "Create access entries").
PRINCIPAL_PATTERN = r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]{1,512}$"
SCHEDULERS = ("kueue", "volcano", "kai")
EFA_DEVICES = ("plugin", "dra")
NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
SYSTEM_GROUP = "system"
# The node-side validation policies a managed node group can honour: EKS joins a node whatever its user data returns,
# so "fail" cannot stop provisioning, and "drain" is Slurm's.
POLICIES = ("taint", "report")


class Endpoint(SpecModel):
    """Who reaches the Kubernetes API. Private by default (from the VPC only)."""

    public: bool = Field(False, description="Also expose the API endpoint publicly, to public_access_cidrs only.")
    public_access_cidrs: List[str] = Field(default_factory=list,
                                           description="CIDRs allowed to the public endpoint (required with public).")

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, v: List[str]) -> List[str]:
        for c in v:
            try:
                net = ipaddress.IPv4Network(c, strict=True)
            except ValueError:
                raise ValueError(f"{c!r} is not an IPv4 network CIDR") from None
            if net.prefixlen == 0:
                raise ValueError("0.0.0.0/0 opens the API to the internet; list the networks that need it")
        return v


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


class KueueSettings(SpecModel):
    """Kueue: all-or-nothing admission and topology-aware placement."""

    wait_for_pods_ready_seconds: int = Field(
        600, ge=60, le=86400,
        description="waitForPodsReady timeout: a workload whose pods are not all running by then is evicted and "
                    "requeued (all-or-nothing admission).")
    topology_aware: bool = Field(True, description="Topology-aware scheduling over EC2's network-topology node labels.")


class EksControlPlaneSettings(SpecModel):
    """An EKS control plane: its Kubernetes version, who administers it, who reaches its API, its second AZ. The eks
    kind extends it (`EksSettings`); SageMaker HyperPod on EKS (hyperpod-eks) uses it as its ``eks`` section."""

    kubernetes_version: str = Field(
        DEFAULT_KUBERNETES_VERSION,
        description=f"Kubernetes minor version, one of {', '.join(KUBERNETES_VERSIONS)} (default: the newest that both "
                    "EKS and SageMaker HyperPod on EKS support).")
    admins: List[str] = Field(
        min_length=1,
        description="IAM role or user ARNs given cluster-admin access entries; nobody else gets one.")
    endpoint: Endpoint = Field(default_factory=Endpoint)
    control_plane_availability_zone: Optional[str] = Field(
        None, description="A second AZ for the control plane's subnet (EKS needs two); default: a, or b when the GPU "
                          "AZ is a. Must offer EKS (preflight checks).")

    @field_validator("admins")
    @classmethod
    def _admins(cls, v: List[str]) -> List[str]:
        bad = [a for a in v if not re.match(PRINCIPAL_PATTERN, a)]
        if bad:
            raise ValueError(f"not IAM role or user ARNs: {', '.join(bad)} (expected arn:aws:iam::123456789012:role/NAME)")
        if len(set(v)) != len(v):
            raise ValueError("admins are listed twice")
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


def settings_of(spec: ClusterSpec) -> EksSettings:
    if not isinstance(spec.orchestrator, EksOrchestrator):
        raise TypeError(f"the spec's orchestrator is {spec.orchestrator.type}, not eks")
    return spec.orchestrator.eks


def control_plane_of(spec: ClusterSpec) -> EksControlPlaneSettings:
    """The ``eks`` section of any kind that runs an EKS control plane (eks, hyperpod-eks)."""
    found = getattr(spec.orchestrator, "eks", None)
    if not isinstance(found, EksControlPlaneSettings):
        raise TypeError(f"the spec's orchestrator {spec.orchestrator.type} has no EKS control plane")
    return found


def control_plane_zone(spec: ClusterSpec) -> str:
    """The control plane's second AZ: the spec's, else ``<region>a`` (``<region>b`` when the GPUs are in a)."""
    chosen = control_plane_of(spec).control_plane_availability_zone
    if chosen:
        return chosen
    return spec.region + ("b" if spec.availability_zone.endswith("a") else "a")


def extra_availability_zones(spec: ClusterSpec) -> List[str]:
    return [control_plane_zone(spec)]


def extra_instances(spec: ClusterSpec) -> List[ExtraInstance]:
    system = settings_of(spec).system_nodes
    return [ExtraInstance(SYSTEM_GROUP, system.instance_type, system.count)]


def spec_rules(spec: ClusterSpec) -> List[Problem]:
    s = settings_of(spec)
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


def control_plane_rules(spec: ClusterSpec) -> List[Problem]:
    """The endpoint and the second AZ, for every kind with an EKS control plane (``orchestrator.eks``)."""
    s, at = control_plane_of(spec), "orchestrator.eks"
    found: List[Problem] = []
    if s.endpoint.public and not s.endpoint.public_access_cidrs:
        found.append((f"{at}.endpoint.public_access_cidrs", "a public endpoint needs the CIDRs allowed to reach it"))
    if s.endpoint.public_access_cidrs and not s.endpoint.public:
        found.append((f"{at}.endpoint.public_access_cidrs", "apply with public: true; the endpoint is private"))
    zone = control_plane_zone(spec)
    if not re.fullmatch(re.escape(spec.region) + r"[a-z]", zone) or zone == spec.availability_zone:
        found.append((f"{at}.control_plane_availability_zone", f"{zone!r} must be another AZ of {spec.region} than "
                      f"the GPU AZ {spec.availability_zone} (EKS needs control-plane subnets in two AZs)"))
    return found


def network_rules(spec: ClusterSpec, *, capacity_blocks: bool = True) -> List[Problem]:
    """NAT egress (charts and images come from public registries) and, with an existing VPC, the second AZ's subnet
    (and one subnet for a Capacity Block group, when the kind takes Capacity Blocks)."""
    found: List[Problem] = []
    new, existing = spec.network.new_vpc, spec.network.existing_vpc
    if new is not None and not new.nat_gateway:
        found.append(("network.new_vpc.nat_gateway", "EKS nodes pull images and the kubectl handler pulls Helm charts "
                      "from public registries: keep the NAT gateway"))
    if existing is not None:
        if not existing.extra_subnet_ids:
            found.append(("network.existing_vpc.extra_subnet_ids", f"required with orchestrator "
                          f"{spec.orchestrator.type}: at least one "
                          "private subnet (with egress) in another AZ, for the control plane and the AMP scraper"))
        blocks = [i for i, g in enumerate(spec.node_groups) if g.capacity.type == "capacity-block"]
        if capacity_blocks and blocks and len(existing.subnet_ids) > 1:
            found.append(("network.existing_vpc.subnet_ids", f"node_groups[{blocks[0]}] is a Capacity Block: its EKS "
                          "node group launches in exactly one subnet, of the reservation's AZ; list one subnet "
                          f"(got {len(existing.subnet_ids)})"))
    return found

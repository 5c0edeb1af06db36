"""An EKS control plane's settings (the ``eks`` section of every Kubernetes kind) and the rules a spec must meet for
it. Field paths in problems are from the spec's top (``orchestrator.eks.kubernetes_version``)."""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, List, Optional

from pydantic import Field, field_validator

from fmcluster.platforms.kubernetes.versions import (
    DEFAULT_KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
)
from fmcluster.spec.base import Problem, SpecModel

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

# Access entries take IAM roles and users (not STS assumed-role session ARNs) (EKS user guide, "Create access entries").
PRINCIPAL_PATTERN = r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]{1,512}$"
NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


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


# The node group a Kubernetes kind runs cluster services on (CoreDNS, controllers, a scheduler's pods).
SYSTEM_GROUP = "system"


class KueueSettings(SpecModel):
    """Kueue: all-or-nothing admission and topology-aware placement."""

    wait_for_pods_ready_seconds: int = Field(
        1800, ge=60, le=86400,
        description="waitForPodsReady timeout: a workload whose pods are not all running by then is evicted and "
                    "requeued (all-or-nothing admission). The default leaves room for the first pull of a training "
                    "image of 10 GB or more onto every node of the job (docs/eks.md).")
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
        None, description="With an existing VPC: the AZ of extra_subnet_ids, for preflight to check it offers EKS. "
                          "With a new VPC the control plane uses the network's second-AZ subnet "
                          "(network.new_vpc.second_availability_zone); if given here it must name that AZ.")

    @field_validator("admins")
    @classmethod
    def _admins(cls, v: List[str]) -> List[str]:
        bad = [a for a in v if not re.match(PRINCIPAL_PATTERN, a)]
        if bad:
            raise ValueError(f"not IAM role or user ARNs: {', '.join(bad)} (expected arn:aws:iam::123456789012:role/NAME)")
        if len(set(v)) != len(v):
            raise ValueError("admins are listed twice")
        return v


def control_plane_of(spec: ClusterSpec) -> EksControlPlaneSettings:
    """The ``eks`` section of any kind that runs an EKS control plane (eks, hyperpod-eks)."""
    found = getattr(spec.orchestrator, "eks", None)
    if not isinstance(found, EksControlPlaneSettings):
        raise TypeError(f"the spec's orchestrator {spec.orchestrator.type} has no EKS control plane")
    return found


def control_plane_zone(spec: ClusterSpec) -> str:
    """The control plane's second AZ: the network's second-AZ subnet's (``spec.second_availability_zone``); with an
    existing VPC, ``control_plane_availability_zone`` when given."""
    return control_plane_of(spec).control_plane_availability_zone or spec.second_availability_zone


def control_plane_rules(spec: ClusterSpec) -> List[Problem]:
    """The endpoint and the second AZ, for every kind with an EKS control plane (``orchestrator.eks``)."""
    s, at = control_plane_of(spec), "orchestrator.eks"
    found: List[Problem] = []
    if s.endpoint.public and not s.endpoint.public_access_cidrs:
        found.append((f"{at}.endpoint.public_access_cidrs", "a public endpoint needs the CIDRs allowed to reach it"))
    if s.endpoint.public_access_cidrs and not s.endpoint.public:
        found.append((f"{at}.endpoint.public_access_cidrs", "apply with public: true; the endpoint is private"))
    chosen = control_plane_of(spec).control_plane_availability_zone
    if chosen is None:
        return found  # the network's second AZ, which the spec checks
    if not re.fullmatch(re.escape(spec.region) + r"[a-z]", chosen) or chosen == spec.availability_zone:
        found.append((f"{at}.control_plane_availability_zone", f"{chosen!r} must be another AZ of {spec.region} than "
                      f"the GPU AZ {spec.availability_zone} (EKS needs control-plane subnets in two AZs)"))
    elif spec.network.new_vpc is not None and chosen != spec.second_availability_zone:
        found.append((f"{at}.control_plane_availability_zone", f"the control plane uses the network's second-AZ "
                      f"subnet, in {spec.second_availability_zone}: set network.new_vpc.second_availability_zone: "
                      f"{chosen} and leave this out (the network keeps that subnet when the orchestrator changes)"))
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

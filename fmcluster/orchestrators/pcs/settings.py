"""`orchestrator: {type: pcs, pcs: {...}}`: AWS Parallel Computing Service (managed Slurm)."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Literal, Optional

from pydantic import Field, field_validator

from fmcluster import catalog, images
from fmcluster.spec.base import Problem, SpecModel
from fmcluster.spec.node_group import AMI_PATTERN
from fmcluster.spec.orchestrator import ExtraInstance, OrchestratorSettings

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

# Instances a PCS controller of each size manages (PCS user guide, "Cluster size").
PCS_MAX_NODES = {"SMALL": 32, "MEDIUM": 512, "LARGE": 2048}


class PcsSettings(SpecModel):
    """AWS Parallel Computing Service (managed Slurm)."""

    slurm_version: Literal["24.11", "25.05"] = Field("24.11", description="Slurm version PCS runs.")
    size: Optional[Literal["SMALL", "MEDIUM", "LARGE"]] = Field(
        None, description="Controller size; default from the node count (SMALL <= 32, MEDIUM <= 512, else LARGE)."
    )
    scale_down_idle_seconds: int = Field(600, ge=60, le=86400, description="Idle time before dynamic nodes stop.")
    login_instance_type: str = Field("m5.xlarge", description="Login node type (one static node, no EFA).")
    login_ami_id: Optional[str] = Field(
        None, pattern=AMI_PATTERN, description="PCS-ready AMI for the login node; default: the first x86 group's ami_id"
    )
    login_image_family: Optional[str] = Field(
        None, description="Family of login_ami_id (fmcluster.images); default: that of the group whose AMI it is."
    )
    gpu_job_map: bool = Field(
        False, description="Set the cluster's Prolog/Epilog to the hooks that tell dcgm-exporter which Slurm job holds "
        "each GPU (its hpc_job label; needs observability). Off by default because a node without the hooks drains "
        "on its next job: turn it on for a new cluster, or once every compute node runs an fmcluster runtime that "
        "writes them (docs/observability.md).",
    )

    health_check: bool = Field(
        False, description="Set the cluster's HealthCheckProgram to the program every node writes at boot: the boot "
        "validator's fast fault checks every health_check_interval_seconds; a failure drains the node with the "
        "failing checks (running jobs finish), and under validation.policy drain a node it drained for a non-hardware "
        "check returns to service once it passes. Off by default: that PCS accepts these parameters is unverified, "
        "and nodes booted before their runtime wrote the program have none (docs/resilience.md).",
    )
    health_check_interval_seconds: int = Field(
        300, ge=60, le=86400, description="HealthCheckInterval: seconds between two runs on a node (with health_check)."
    )

    @field_validator("login_instance_type")
    @classmethod
    def _login_type(cls, v: str) -> str:
        if v not in catalog.all_types():
            raise ValueError(f"unknown instance type {v!r}; allowed: {', '.join(catalog.cpu_types())}")
        return v


class PcsOrchestrator(OrchestratorSettings):
    type: Literal["pcs"] = "pcs"
    pcs: PcsSettings = Field(default_factory=PcsSettings)

    def size_for(self, nodes: int) -> str:
        if self.pcs.size:
            return self.pcs.size
        return next(size for size, limit in PCS_MAX_NODES.items() if nodes <= limit or size == "LARGE")


def instances(spec: ClusterSpec) -> int:
    """Instances the controller manages: every node an elastic group may grow to, and the login node."""
    return sum(g.max_size for g in spec.node_groups) + 1


def login_ami_id(spec: ClusterSpec) -> Optional[str]:
    settings = PcsOrchestrator.of(spec).pcs
    if settings.login_ami_id:
        return settings.login_ami_id
    return next((g.ami_id for g in spec.node_groups if g.instance.architecture == "x86_64" and g.ami_id), None)


def login_image(spec: ClusterSpec) -> images.ImageFamily:
    """The login AMI's family: given, or that of the first x86 group with an ami_id (whose AMI it then is)."""
    settings = PcsOrchestrator.of(spec).pcs
    if settings.login_image_family:
        return images.family(settings.login_image_family)
    donor = next((g for g in spec.node_groups if g.instance.architecture == "x86_64" and g.ami_id), None)
    return donor.image if donor is not None else images.family(images.DEFAULT_FAMILY)


def extra_instances(spec: ClusterSpec) -> List[ExtraInstance]:
    return [ExtraInstance("login", PcsOrchestrator.of(spec).pcs.login_instance_type)]


def spec_rules(spec: ClusterSpec) -> List[Problem]:
    found: List[Problem] = []
    settings = PcsOrchestrator.of(spec)
    for i, g in enumerate(spec.node_groups):
        if len(g.name) > 25 or (len(g.name) == 10 and g.name.isalnum()):
            found.append((f"node_groups[{i}].name", "PCS node group and queue names are at most 25 characters "
                          "and never exactly 10 letters/digits (those look like PCS ids)"))
        if not g.ami_id:
            found.append((f"node_groups[{i}].ami_id", "required with orchestrator pcs: a PCS-ready AMI (the PCS "
                          "agent and its Slurm build installed; see README 'PCS AMI')"))
    nodes = instances(spec)
    size = settings.size_for(nodes)
    if nodes > PCS_MAX_NODES[size]:
        found.append(("orchestrator.pcs.size", f"{size} manages up to {PCS_MAX_NODES[size]} instances; "
                      f"the spec has {nodes} (with the login node); use a larger size"))
    if login_ami_id(spec) is None:
        found.append(("orchestrator.pcs.login_ami_id", "required when no x86_64 node group has an ami_id"))
    if settings.pcs.login_ami_id and not settings.pcs.login_image_family:
        found.append(("orchestrator.pcs.login_image_family", "required with login_ami_id (it decides the root device); "
                      f"one of {', '.join(images.FAMILIES)}"))
    if settings.pcs.login_image_family and settings.pcs.login_image_family not in images.FAMILIES:
        found.append(("orchestrator.pcs.login_image_family", f"one of {', '.join(images.FAMILIES)}"))
    if settings.pcs.gpu_job_map and not spec.observability.enabled:
        found.append(("orchestrator.pcs.gpu_job_map", "needs observability.enabled: the collectors' install writes the "
                      "hooks on the nodes, and without dcgm-exporter there is no job label to set"))
    return found

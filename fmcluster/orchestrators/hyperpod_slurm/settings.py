"""`orchestrator: {type: hyperpod-slurm, hyperpod: {...}}`: SageMaker HyperPod with Slurm.

Worker instance groups are the spec's node groups (one Slurm partition each, named after the group);
this section adds the controller and the optional login group and the cluster-wide settings.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, List, Literal, Optional

from pydantic import Field, field_validator, model_validator

from fmcluster.platforms.hyperpod.settings import HyperPodInstanceType, ThreadsPerCore, offered_problem
from fmcluster.runtime.contract import SSH_KEY_TYPES, UID_MAX, UID_MIN, USER_NAME_PATTERN, ssh_key_ok
from fmcluster.spec.base import Problem, SpecModel, raise_problems
from fmcluster.spec.orchestrator import ExtraInstance, OrchestratorSettings

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

CONTROLLER_GROUP = "controller"
LOGIN_GROUP = "login"


class ClusterUser(SpecModel):
    """A POSIX user created on every node, with a fixed uid so files on shared storage keep one owner.
    The rules are the node contract's (runtime/contract.py), so what validates here also works on the node."""

    name: str = Field(pattern=USER_NAME_PATTERN, description="a Linux user name: lower case, digits, _ and -")
    uid: int = Field(ge=UID_MIN, le=UID_MAX,
                     description=f"Fixed uid, {UID_MIN}-{UID_MAX} (below {UID_MIN} clashes with AMI users).")
    groups: List[str] = Field(default_factory=list, description="Existing groups to add the user to, e.g. docker.")
    ssh_public_keys: List[str] = Field(
        default_factory=list,
        description=f"Lines for ~/.ssh/authorized_keys; key types {', '.join(SSH_KEY_TYPES)} (not ssh-dss).",
    )

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: List[str]) -> List[str]:
        bad = [g for g in v if not re.match(USER_NAME_PATTERN, g)]
        if bad:
            raise ValueError(f"not group names: {', '.join(bad)} (lower case, digits, _ and -)")
        return v

    @field_validator("ssh_public_keys")
    @classmethod
    def _keys(cls, v: List[str]) -> List[str]:
        bad = [k[:24] for k in v if not ssh_key_ok(k)]
        if bad:
            raise ValueError(f"not OpenSSH public keys of an accepted type ({', '.join(SSH_KEY_TYPES)}): "
                             f"{', '.join(bad)}...")
        return v


class HyperPodSettings(SpecModel):
    """SageMaker HyperPod (Slurm): the controller and login groups and cluster-wide settings."""

    controller_instance_type: HyperPodInstanceType = Field("ml.m5.12xlarge", description="Slurm controller (one node).")
    login_instance_type: Optional[HyperPodInstanceType] = Field(None, description="Login nodes' type; absent: no login group.")
    login_count: int = Field(1, ge=1, le=8, description="Login nodes (with login_instance_type).")
    threads_per_core: ThreadsPerCore = 1
    node_recovery: Literal["Automatic", "None"] = Field(
        "Automatic", description="Automatic: HyperPod reboots or replaces nodes that fail health checks."
    )
    deep_health_checks: bool = Field(
        True, description="Stress and connectivity checks on GPU groups before their nodes join (adds start time)."
    )
    slurm_config_strategy: Literal["Managed", "Overwrite", "Merge"] = Field(
        "Managed", description="Who owns slurm.conf partitions: Managed (HyperPod), Overwrite, or Merge."
    )
    volume_gib: int = Field(500, ge=1, le=16384, description="EBS volume at /opt/sagemaker on every node.")
    users: List[ClusterUser] = Field(default_factory=list, description="Users created on every node.")
    gpu_job_map: bool = Field(
        False, description="The controller's lifecycle sets Slurm's Prolog/Epilog to the hooks that tell dcgm-exporter "
        "which job holds each GPU (its hpc_job label; needs observability). Off by default because a node without the "
        "hooks drains on its next job: turn it on for a new cluster (docs/observability.md).",
    )

    @model_validator(mode="after")
    def _users(self) -> HyperPodSettings:
        found = []
        for field in ("name", "uid"):
            values = [getattr(u, field) for u in self.users]
            for i, value in enumerate(values):
                if value in values[:i]:
                    found.append((f"users[{i}].{field}", f"{value} is used by another user"))
        if "login_count" in self.model_fields_set and self.login_instance_type is None:
            found.append(("login_count", "applies with login_instance_type"))
        raise_problems(found)
        return self


class HyperPodSlurmOrchestrator(OrchestratorSettings):
    type: Literal["hyperpod-slurm"] = "hyperpod-slurm"
    hyperpod: HyperPodSettings = Field(default_factory=HyperPodSettings)


def extra_instances(spec: ClusterSpec) -> List[ExtraInstance]:
    """The controller and the optional login group."""
    settings = HyperPodSlurmOrchestrator.of(spec).hyperpod
    found = [ExtraInstance(CONTROLLER_GROUP, settings.controller_instance_type)]
    if settings.login_instance_type:
        found.append(ExtraInstance(LOGIN_GROUP, settings.login_instance_type, settings.login_count))
    return found


def spec_rules(spec: ClusterSpec) -> List[Problem]:
    found: List[Problem] = []
    for i, g in enumerate(spec.node_groups):
        at = f"node_groups[{i}]"
        problem = offered_problem(g.instance_type)
        if problem:
            found.append((f"{at}.instance_type", problem))
        if g.name in (CONTROLLER_GROUP, LOGIN_GROUP):
            found.append((f"{at}.name", f"{g.name!r} is the HyperPod {g.name} group's name; pick another"))
        if g.ami_id:
            found.append((f"{at}.ami_id", "HyperPod runs its own DLAMI-based image; remove ami_id"))
        if g.placement is not None:
            found.append((f"{at}.placement", "HyperPod places instances itself; remove placement"))
    if HyperPodSlurmOrchestrator.of(spec).hyperpod.gpu_job_map and not spec.observability.enabled:
        found.append(("orchestrator.hyperpod.gpu_job_map", "needs observability.enabled: the collectors' install writes "
                      "the hooks on the nodes, and without dcgm-exporter there is no job label to set"))
    return found

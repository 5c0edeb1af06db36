"""`orchestrator: {type: hyperpod-eks, eks: {...}, hyperpod: {...}, task_governance: {...}}`: SageMaker HyperPod with
Amazon EKS orchestration, and the rules a spec must meet for it. Field paths in problems are from the spec's top.

- ``eks``: the EKS control plane HyperPod's nodes join (the eks kind's control-plane keys; versions HyperPod supports).
- ``hyperpod``: cluster-wide settings of the instance groups (the node groups, and a CPU system group).
- ``task_governance``: teams with GPU quotas, lending and borrowing, priority classes (HyperPod's managed Kueue).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional

from pydantic import Field, field_validator, model_validator

from fmcluster.orchestrators.hyperpod_eks.versions import (
    DEFAULT_KUBERNETES_VERSION,
    HYPERPOD_KUBERNETES_VERSIONS,
    KUBERNETES_VERSIONS,
    TASK_GOVERNANCE,
)
from fmcluster.platforms.hyperpod.settings import HyperPodInstanceType, ThreadsPerCore, offered_problem
from fmcluster.platforms.kubernetes.settings import (
    EksControlPlaneSettings,
    control_plane_rules,
    network_rules,
)
from fmcluster.platforms.kubernetes.versions import KUBERNETES_VERSIONS as EKS_KUBERNETES_VERSIONS
from fmcluster.runtime.contract import ml_type
from fmcluster.spec.base import Problem, SpecModel, raise_problems
from fmcluster.spec.orchestrator import ExtraInstance, OrchestratorSettings

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec
    from fmcluster.spec.node_group import NodeGroup

SYSTEM_GROUP = "system"
# Task governance's names (aws/sagemaker-hyperpod-cli, src/sagemaker/hyperpod/cli/constants/command_constants.py:
# HYPERPOD_NAMESPACE_PREFIX, SAGEMAKER_MANAGED_LOCAL_QUEUE_SUFFIX; the SageMaker guide's kubectl examples label jobs
# kueue.x-k8s.io/priority-class: <priority class>-priority).
TEAM_NAMESPACE_PREFIX = "hyperpod-ns-"
LOCAL_QUEUE_SUFFIX = "-localqueue"
PRIORITY_CLASS_SUFFIX = "-priority"
# AWS::SageMaker::ComputeQuota ComputeQuotaTarget.TeamName and ClusterSchedulerConfig PriorityClasses[].Name
# (CloudFormation schema): lower case, digits and inner hyphens, at most 40 characters.
TEAM_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$"
PRIORITY_CLASS_PATTERN = TEAM_NAME_PATTERN
MAX_PRIORITY_CLASSES = 10  # ClusterSchedulerConfig: PriorityClasses maxItems
MAX_QUOTA_NAME = 63  # ComputeQuota Name (CloudFormation schema); fmcluster names a quota <cluster>-<team>
# What each team's compute quota holds of the system instance type, for MPI launchers (the first job's launcher asks
# for 2 CPUs and 2 GiB: platforms/kubernetes/fabric_job.LAUNCHER_RESOURCES, a test holds them equal): two at a time.
# ComputeQuotaResourceConfig takes VCpu and MemoryInGiB for any instance type of the cluster (SageMaker API reference).
LAUNCHER_VCPUS, LAUNCHER_MEMORY_GIB, LAUNCHERS_PER_TEAM = 2, 2, 2
# The validation policies a HyperPod on EKS node can honour: fail (the lifecycle script fails, HyperPod provisions
# another instance), taint (the node gate keeps it out of work with the reason) or report. drain is Slurm's.
POLICIES = ("taint", "replace", "fail", "report")
# What hyperpod-slurm takes under `hyperpod:` and a HyperPod on EKS cluster has no use for: no Slurm controller, no
# login nodes, no partitions, no POSIX users (pods bring their own).
SLURM_ONLY = {
    "controller_instance_type": "HyperPod on EKS has no Slurm controller: the EKS control plane schedules",
    "login_instance_type": "HyperPod on EKS has no Slurm login nodes: use kubectl against the EKS API",
    "login_count": "HyperPod on EKS has no Slurm login nodes",
    "slurm_config_strategy": "there is no slurm.conf on HyperPod on EKS",
    "partitions": "Slurm partitions do not exist on HyperPod on EKS: teams and their queues "
                  "(orchestrator.task_governance.teams) divide the cluster",
    "users": "nodes get no POSIX users on HyperPod on EKS: pods run as their images' users",
}


class HyperPodEksControlPlane(EksControlPlaneSettings):
    """The EKS control plane HyperPod's nodes join: private subnets, API authentication (access entries), the VPC
    CNI, and a Kubernetes version SageMaker HyperPod supports."""

    kubernetes_version: str = Field(
        DEFAULT_KUBERNETES_VERSION,
        description=f"Kubernetes minor version, one of {', '.join(KUBERNETES_VERSIONS)}: the versions both SageMaker "
                    f"HyperPod on EKS (its prerequisites list {HYPERPOD_KUBERNETES_VERSIONS[0]}-"
                    f"{HYPERPOD_KUBERNETES_VERSIONS[-1]}) and fmcluster's EKS control plane support (default: the newest).")

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v not in KUBERNETES_VERSIONS:
            if v not in HYPERPOD_KUBERNETES_VERSIONS:
                why = (f"SageMaker HyperPod on EKS does not support Kubernetes {v} (its EKS prerequisites list "
                       f"{', '.join(HYPERPOD_KUBERNETES_VERSIONS)})")
            else:
                why = (f"SageMaker HyperPod supports Kubernetes {v}, but fmcluster builds only EKS control planes of "
                       f"{', '.join(EKS_KUBERNETES_VERSIONS)}")
            raise ValueError(f"{why}; choose one of {', '.join(KUBERNETES_VERSIONS)} (default "
                             f"{DEFAULT_KUBERNETES_VERSION})")
        return v


class HyperPodEksSettings(SpecModel):
    """SageMaker HyperPod on EKS: the instance groups' cluster-wide settings. Each spec node group is one instance
    group; a CPU system group runs cluster services (CoreDNS, Kueue, operators, exporters)."""

    system_instance_type: HyperPodInstanceType = Field(
        "ml.m5.4xlarge", description="CPU instance group for cluster services (29 pods per ml.m5.4xlarge node: HyperPod "
                                     "gives each instance one ENI).")
    system_count: int = Field(2, ge=1, le=10, description="System nodes (two keep CoreDNS and controllers available).")
    node_recovery: Literal["Automatic", "None"] = Field(
        "Automatic", description="Automatic: HyperPod reboots or replaces GPU nodes its health checks find faulty.")
    deep_health_checks: bool = Field(
        True, description="InstanceStress and InstanceConnectivity on GPU groups before their nodes take work; HyperPod "
                          "then refuses custom taints on those groups.")
    threads_per_core: ThreadsPerCore = 1
    volume_gib: int = Field(500, ge=1, le=16384, description="EBS volume at /opt/sagemaker on every node.")
    training_operator: bool = Field(
        False, description="Install the HyperPod training operator add-on (HyperPodPyTorchJob: elastic training, "
                           "checkpointless training) and cert-manager, which it needs.")

    @model_validator(mode="before")
    @classmethod
    def _slurm_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            raise_problems([(key, f"{why}; it applies to orchestrator type hyperpod-slurm")
                            for key, why in SLURM_ONLY.items() if key in data])
        return data


class PriorityClass(SpecModel):
    """A task priority: tasks of a higher weight go first and may preempt lower ones (ClusterSchedulerConfig)."""

    name: str = Field(pattern=PRIORITY_CLASS_PATTERN, description="1-40 lower-case letters, digits, inner hyphens; "
                                                                   "jobs name it as <name>-priority")
    weight: int = Field(ge=0, le=100, description="0-100; higher runs first.")


class Team(SpecModel):
    """A team: its own namespace and queue (hyperpod-ns-<name>, hyperpod-ns-<name>-localqueue) and a GPU quota per node
    group (AWS::SageMaker::ComputeQuota)."""

    name: str = Field(pattern=TEAM_NAME_PATTERN, description="1-40 lower-case letters, digits and inner hyphens")
    gpus: Dict[str, int] = Field(min_length=1, description="Node group name -> GPUs the team is guaranteed there.")
    sharing: Literal["lend-and-borrow", "lend", "dont-lend"] = Field(
        "lend-and-borrow", description="Idle GPUs: lend them to other teams and borrow theirs, only lend, or neither.")
    borrow_limit_percent: Optional[int] = Field(
        None, ge=1, le=500, description="How much beyond its quota the team may borrow, in percent of its quota "
                                        "(service default 50); lend-and-borrow only.")
    preempt_team_tasks: Literal["lower-priority", "never"] = Field(
        "lower-priority", description="Whether a task of the team preempts the team's own lower-priority tasks.")
    fair_share_weight: Optional[int] = Field(None, ge=0, le=100,
                                             description="Weight when idle compute is shared by fair share (0-100).")

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: Dict[str, int]) -> Dict[str, int]:
        bad = [f"{k}={n}" for k, n in v.items() if not isinstance(n, int) or n < 1]
        if bad:
            raise ValueError(f"GPU quotas are whole numbers of at least 1: {', '.join(bad)}")
        return v

    @model_validator(mode="after")
    def _borrow(self) -> Team:
        if self.borrow_limit_percent is not None and self.sharing != "lend-and-borrow":
            raise_problems([("borrow_limit_percent", f"applies with sharing lend-and-borrow, not {self.sharing}")])
        return self

    @property
    def namespace(self) -> str:
        return f"{TEAM_NAMESPACE_PREFIX}{self.name}"

    @property
    def local_queue(self) -> str:
        return f"{self.namespace}{LOCAL_QUEUE_SUFFIX}"


class TaskGovernance(SpecModel):
    """HyperPod task governance (its managed Kueue): a cluster policy and one compute quota per team."""

    fair_share: bool = Field(True, description="Idle compute goes to teams by their fair-share weight.")
    idle_resource_sharing: bool = Field(True, description="Teams may borrow compute other teams leave idle.")
    priority_classes: List[PriorityClass] = Field(
        default_factory=lambda: [PriorityClass(name="training", weight=50)],
        max_length=MAX_PRIORITY_CLASSES, description="Task priorities (at most 10).")
    teams: List[Team] = Field(min_length=1, description="Teams and their GPU quotas; jobs go through their queues.")

    @model_validator(mode="after")
    def _unique(self) -> TaskGovernance:
        found = []
        for field, items in (("teams", self.teams), ("priority_classes", self.priority_classes)):
            names = [x.name for x in items]
            found += [(f"{field}[{i}].name", f"{n!r} is used twice") for i, n in enumerate(names) if n in names[:i]]
        raise_problems(found)
        return self


class HyperPodEksOrchestrator(OrchestratorSettings):
    type: Literal["hyperpod-eks"] = "hyperpod-eks"
    eks: HyperPodEksControlPlane
    hyperpod: HyperPodEksSettings = Field(default_factory=HyperPodEksSettings)
    task_governance: TaskGovernance


def extra_instances(spec: ClusterSpec) -> List[ExtraInstance]:
    """The system instance group: HyperPod instances beside the node groups, and no controller."""
    hp = HyperPodEksOrchestrator.of(spec).hyperpod
    return [ExtraInstance(SYSTEM_GROUP, hp.system_instance_type, hp.system_count)]


def deep_health_checked(spec: ClusterSpec, group: NodeGroup) -> bool:
    """Whether HyperPod runs its deep health checks on the group's instances (GPU groups, when the spec says so; never
    on an elastic group: HyperPod's autoscaling takes no instance group with deep health checks, whose 60-90 minutes
    would leave pods pending and over-provision, SageMaker guide "Create a NodeClass")."""
    return HyperPodEksOrchestrator.of(spec).hyperpod.deep_health_checks and group.role == "gpu" and not group.elastic


def gpus_by_type(spec: ClusterSpec) -> Dict[str, int]:
    """ml. instance type -> GPUs of the cluster's node groups of that type."""
    found: Dict[str, int] = defaultdict(int)
    for g in spec.node_groups:
        found[ml_type(g.instance_type)] += (g.instance.gpus or 0) * g.count
    return dict(found)


def team_gpus_by_type(spec: ClusterSpec, team: Team) -> Dict[str, int]:
    """A team's GPU quota per ml. instance type (ComputeQuota counts per instance type; two groups of one type add up)."""
    groups = {g.name: g for g in spec.node_groups}
    found: Dict[str, int] = defaultdict(int)
    for name, gpus in team.gpus.items():
        if name in groups:
            found[ml_type(groups[name].instance_type)] += gpus
    return dict(found)


def spec_rules(spec: ClusterSpec) -> List[Problem]:
    s = HyperPodEksOrchestrator.of(spec)
    found: List[Problem] = []
    for i, g in enumerate(spec.node_groups):
        at = f"node_groups[{i}]"
        problem = offered_problem(g.instance_type)
        if problem:
            found.append((f"{at}.instance_type", problem))
        if g.name == SYSTEM_GROUP:
            found.append((f"{at}.name", f"{SYSTEM_GROUP!r} is the HyperPod system instance group; pick another"))
        if g.ami_id:
            found.append((f"{at}.ami_id", "HyperPod runs its own EKS AMI; remove ami_id"))
        if g.placement is not None:
            found.append((f"{at}.placement", "HyperPod places instances itself; remove placement"))
        found += _elastic_rules(at, g)
    found += control_plane_rules(spec)
    if spec.validation.level == "deep":
        found.append(("validation.level", "HyperPod's own deep health checks (DCGM diagnostics, NCCL, EFA) cover what "
                      "the deep level would run: keep orchestrator.hyperpod.deep_health_checks on and use standard"))
    found += network_rules(spec, capacity_blocks=False)
    found += _team_rules(spec, s.task_governance)
    return found


# HyperPod's autoscaling on EKS (managed Karpenter), SageMaker guide "Create a NodeClass":
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html
AUTOSCALING_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html"


def _elastic_rules(at: str, g: NodeGroup) -> List[Problem]:
    """An elastic group is an instance group HyperPod's Karpenter scales: it starts empty and may shrink to none
    (Karpenter scales a group that starts with nodes down to 0), on On-Demand capacity only."""
    if not g.elastic:
        return []
    found: List[Problem] = []
    if g.min_size != 0:
        found.append((f"{at}.min_count", f"HyperPod's autoscaling starts an instance group at 0 nodes and scales it "
                      f"down to 0 when idle, so an elastic group's floor is 0, not {g.min_size}: set min_count: 0, or "
                      f"leave min_count and max_count out for a static group ({AUTOSCALING_GUIDE})"))
    if g.capacity.type != "on-demand":
        found.append((f"{at}.capacity.type", f"HyperPod's autoscaling takes On-Demand instance groups only, not "
                      f"{g.capacity.type} (training plans and reserved capacity are not supported): make the group "
                      f"static ({AUTOSCALING_GUIDE})"))
    return found


def launcher_quota(spec: ClusterSpec) -> Dict[str, Any]:
    """The system instance type's share of one team's compute quota: room for its jobs' MPI launchers, so task
    governance's Kueue can admit a launcher onto a system node rather than beside a GPU worker."""
    return {"InstanceType": HyperPodEksOrchestrator.of(spec).hyperpod.system_instance_type,
            "VCpu": LAUNCHER_VCPUS * LAUNCHERS_PER_TEAM, "MemoryInGiB": LAUNCHER_MEMORY_GIB * LAUNCHERS_PER_TEAM}


def _launcher_rules(spec: ClusterSpec, governance: TaskGovernance) -> List[Problem]:
    """The teams' launcher shares of the system group must fit in it (quotas are guaranteed capacity)."""
    from fmcluster import catalog
    from fmcluster.runtime.contract import ec2_type

    hp = HyperPodEksOrchestrator.of(spec).hyperpod
    system = catalog.get(ec2_type(hp.system_instance_type))
    if system is None:
        return []
    share = launcher_quota(spec)
    teams = len(governance.teams)
    vcpus, memory_gib = system.vcpus * hp.system_count, system.memory_mib // 1024 * hp.system_count
    if teams * share["VCpu"] <= vcpus and teams * share["MemoryInGiB"] <= memory_gib:
        return []
    return [("orchestrator.task_governance.teams", f"each team's quota holds {share['VCpu']} vCPUs and "
             f"{share['MemoryInGiB']} GiB of the system group for MPI launchers; {teams} teams need "
             f"{teams * share['VCpu']} vCPUs, the system group has {vcpus} ({hp.system_count} x "
             f"{hp.system_instance_type}): raise orchestrator.hyperpod.system_count or system_instance_type")]


def _team_rules(spec: ClusterSpec, governance: TaskGovernance) -> List[Problem]:
    found: List[Problem] = _launcher_rules(spec, governance)
    groups = {g.name: g for g in spec.node_groups}
    at = "orchestrator.task_governance.teams"
    for i, team in enumerate(governance.teams):
        if len(f"{spec.name}-{team.name}") > MAX_QUOTA_NAME:
            found.append((f"{at}[{i}].name", f"the team's compute quota is named {spec.name}-{team.name}, longer than "
                          f"the {MAX_QUOTA_NAME} characters ComputeQuota names take: shorten the team's name"))
        for name, gpus in team.gpus.items():
            g = groups.get(name)
            if g is None:
                found.append((f"{at}[{i}].gpus.{name}", f"no node group {name!r}; node groups: "
                              f"{', '.join(groups)}"))
            elif not g.instance.gpus:
                found.append((f"{at}[{i}].gpus.{name}", f"node group {name} ({g.instance_type}) has no GPUs"))
            elif gpus > g.instance.gpus * g.count:
                found.append((f"{at}[{i}].gpus.{name}", f"{gpus} GPUs is more than node group {name} has "
                              f"({g.count} x {g.instance.gpus} = {g.count * g.instance.gpus})"))
    have = gpus_by_type(spec)
    quotas: Dict[str, int] = defaultdict(int)
    for team in governance.teams:
        for ml, gpus in team_gpus_by_type(spec, team).items():
            quotas[ml] += gpus
    for ml, total in sorted(quotas.items()):
        if total > have.get(ml, 0):
            found.append((at, f"the teams' quotas of {ml} add up to {total} GPUs, the cluster has {have.get(ml, 0)}: "
                          "a quota is capacity the team is guaranteed, so together they cannot exceed the cluster"))
    return found


def plan_notes(spec: ClusterSpec) -> List[str]:
    """What `fmcluster plan` says about the orchestrator: the nodes it runs (no controller) and what task governance
    builds, including what CloudFormation cannot."""
    s = HyperPodEksOrchestrator.of(spec)
    group_nodes = sum(g.count for g in spec.node_groups if not g.elastic)
    hp = s.hyperpod
    lines = [f"SageMaker HyperPod on EKS: no controller (the EKS control plane schedules); {group_nodes} node(s) in "
             f"{len(spec.node_groups)} instance group(s) + {hp.system_count} x {hp.system_instance_type} system = "
             f"{group_nodes + hp.system_count} HyperPod instances (SageMaker quotas apply)"]
    for g in spec.node_groups:
        if g.elastic:
            lines.append(f"elastic group {g.name}: HyperPod's Karpenter (AutoScaling, ClusterRole) starts 0 to "
                         f"{g.max_size} x {ml_type(g.instance_type)} for pending pods and removes empty ones; no "
                         "HyperPod deep health checks on it (autoscaling does not take them); quotas are checked for "
                         f"{g.max_size}")
    tg = s.task_governance
    classes = ", ".join(f"{p.name} {p.weight}" for p in tg.priority_classes) or "none"
    lines.append(f"task governance ({TASK_GOVERNANCE} add-on): cluster policy (AWS::SageMaker::ClusterSchedulerConfig, "
                 f"fair share {'on' if tg.fair_share else 'off'}, idle sharing {'on' if tg.idle_resource_sharing else 'off'}, "
                 f"priorities {classes}); {len(tg.teams)} team quota(s) (AWS::SageMaker::ComputeQuota)")
    have = gpus_by_type(spec)
    for team in tg.teams:
        parts = [f"{n} of {have.get(ml, 0)} GPUs of {ml}" for ml, n in sorted(team_gpus_by_type(spec, team).items())]
        limit = f" up to {team.borrow_limit_percent}%" if team.borrow_limit_percent else ""
        lines.append(f"  team {team.name}: {'; '.join(parts)}, {team.sharing}{limit}; namespace {team.namespace}, "
                     f"queue {team.local_queue}")
    lines.append("  not in CloudFormation: the teams' Kubernetes access (RBAC for scientists in their namespaces); "
                 "aws-cdk-lib 2.275 has no L1 for ComputeQuota (emitted as a plain CloudFormation resource)")
    return lines

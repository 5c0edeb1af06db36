"""`orchestrator: {type: parallelcluster, parallelcluster: {...}}`: AWS ParallelCluster 3 (Slurm), deployed
through its CloudFormation provider. One Slurm queue per node group; this section adds the head node and the
cluster-wide settings. Facts and their sources: docs/parallelcluster.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional, Tuple

from pydantic import Field, field_validator, model_validator

from fmcluster import catalog
from fmcluster.platforms.storage import PARALLELCLUSTER
from fmcluster.spec.base import Problem, SpecModel
from fmcluster.spec.node_group import AMI_PATTERN
from fmcluster.spec.orchestrator import ExtraInstance, OrchestratorSettings, SpecWarning, orchestrator_settings

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec
    from fmcluster.spec.node_group import NodeGroup

# The one place the ParallelCluster version is pinned: the provider template, the official AMIs and the node
# software minimums follow it (requirements-pcluster.lock pins the same version; a test holds them equal).
PCLUSTER_VERSION = "3.16.1"
# Where AWS publishes each version's CloudFormation provider template, in every region ParallelCluster supports
# (https://docs.aws.amazon.com/parallelcluster/latest/ug/cfn-provider-stack.html).
PROVIDER_BUCKET = "{region}-aws-parallelcluster"
PROVIDER_KEY = "parallelcluster/{version}/templates/custom_resource/cluster.yaml"

# Image.Os values of ParallelCluster 3.16 (cluster configuration schema, Image section).
OPERATING_SYSTEMS = ("alinux2023", "ubuntu2204", "ubuntu2404", "rhel8", "rocky8", "rhel9", "rocky9")
OperatingSystem = Literal["alinux2023", "ubuntu2204", "ubuntu2404", "rhel8", "rocky8", "rhel9", "rocky9"]
# Rocky Linux has no public official ParallelCluster AMI: a custom one (pcluster build-image) is required.
NO_OFFICIAL_AMI = ("rocky8", "rocky9")
# fmcluster's node runtime needs Python 3.9+; the system python3 of RHEL 8 is 3.6 (RHEL 8 documentation).
OLD_SYSTEM_PYTHON = ("rhel8",)
# OSes whose instances bill, and must be reserved, as platform "Red Hat Enterprise Linux": ParallelCluster's
# CapacityReservationValidator refuses a reservation whose InstancePlatform differs from the cluster OS's
# (aws/aws-parallelcluster pull request 6747), while fmcluster's reservation preflight requires Linux/UNIX.
RHEL_PLATFORM_OS = ("rhel8", "rhel9")
# ParallelCluster refuses these OSes for P6e-GB200 (InstanceTypeOSCompatibleValidator).
UNSUPPORTED_OS_BY_FAMILY = {"p6e-gb200": ("rhel8", "rocky8", "rhel9")}

# Cluster names ParallelCluster accepts (ClusterNameValidator); its own stack is named after the cluster.
CLUSTER_NAME_PATTERN = r"^[a-zA-Z][a-zA-Z0-9-]{0,59}$"
# Queue and compute resource names: ^[a-z][a-z0-9-]*$, at most 25 characters, never "default" (NameValidator).
MAX_QUEUE_NAME = 25
RESERVED_QUEUE_NAMES = ("default",)
# CloudWatch Logs retentions ParallelCluster's Monitoring section accepts.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653)
# Tag keys ParallelCluster reserves for itself.
RESERVED_TAG_PREFIX = "parallelcluster:"
# Head node types by architecture: the head node must match the compute nodes' architecture.
DEFAULT_HEAD_NODE = {"x86_64": "m7i.2xlarge", "arm64": "m7g.2xlarge"}
HEAD_NODE_GROUP = "head-node"
# What a failed boot validation may do on ParallelCluster (validation.policy), the default first. drain is refused:
# ParallelCluster's clustermgtd terminates a drained static node and launches a replacement (docs/parallelcluster.md),
# so drain would only loop. report is the default: the official AMI's versions are read from release notes, not from
# an inspected AMI, and under fail a check that misjudges it fails every node's bootstrap and rolls the creation back.
POLICIES = ("report", "fail")
# validation.level values that fit a node's bootstrap and CloudFormation's one-hour wait (deep is refused).
LEVELS = ("fast", "standard")
# Outputs of the cluster stack that `fmcluster status` reads back.
CLUSTER_NAME_OUTPUT = "ParallelClusterName"
VALIDATION_MESSAGES_OUTPUT = "ParallelClusterValidationMessages"


class QueueSettings(SpecModel):
    """How one node group's Slurm queue differs from the default (all nodes static)."""

    min_count: Optional[int] = Field(
        None, ge=0,
        description="Static nodes (always running); the rest of count are dynamic nodes Slurm starts for jobs and "
        "stops after scaledown_idle_minutes. Default: count (all static). Capacity Blocks are all static.",
    )

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "reservation_placement_group" in data:
            raise ValueError("reservation_placement_group moved to the node group: placement: {existing_group: NAME} "
                             "(node_groups[i].placement.existing_group), which every orchestrator reads")
        return data


class ParallelClusterSettings(SpecModel):
    """AWS ParallelCluster (Slurm): the head node and cluster-wide settings."""

    cluster_name: Optional[str] = Field(
        None, pattern=CLUSTER_NAME_PATTERN,
        description="ParallelCluster cluster name (its own CloudFormation stack is named after it); default: the "
        "spec's name. Must differ from every fmcluster stack name.",
    )
    os: OperatingSystem = Field("ubuntu2204", description="Image.Os: the OS of every node (official AMI by default).")
    custom_ami: Optional[str] = Field(
        None, pattern=AMI_PATTERN,
        description="Image.CustomAmi for the head node and every queue without its own ami_id: an AMI built with "
        "pcluster build-image (required for rocky8/rocky9).",
    )
    head_node_instance_type: Optional[str] = Field(
        None, description="Head node type (Slurm controller, /home over NFS); default m7i.2xlarge, or m7g.2xlarge "
        "for arm64 (GB200) queues.",
    )
    head_node_root_volume_gib: int = Field(200, ge=50, le=16384, description="Encrypted gp3 root volume of the head node.")
    ssh_key_name: Optional[str] = Field(
        None, min_length=1, max_length=255,
        description="EC2 key pair for SSH to the head node; default none (reach it with SSM Session Manager).",
    )
    queues: Dict[str, QueueSettings] = Field(
        default_factory=dict, description="Per node group (by name): its static node count."
    )
    scaledown_idle_minutes: int = Field(10, ge=1, le=1440, description="Idle time before dynamic nodes stop.")
    queue_update_strategy: Literal["DRAIN", "TERMINATE", "COMPUTE_FLEET_STOP"] = Field(
        "DRAIN",
        description="How a queue change reaches running nodes: DRAIN replaces nodes as their jobs end, so a cdk "
        "deploy can update queues without stopping the compute fleet first.",
    )
    health_check: bool = Field(
        False, description="Add HealthCheckProgram to the cluster's CustomSlurmSettings: a shim the head node writes "
        "under /opt/slurm/etc/scripts that runs each compute node's program (the boot validator's fast fault checks) "
        "every health_check_interval_seconds; a failure drains the node (running jobs finish), and clustermgtd "
        "replaces a drained static node once it is idle. Off by default: how slurmd treats the setting before the "
        "shim exists is unverified (docs/resilience.md).",
    )
    health_check_interval_seconds: int = Field(
        300, ge=60, le=86400, description="HealthCheckInterval: seconds between two runs on a node (with health_check)."
    )
    log_retention_days: int = Field(90, description="CloudWatch Logs retention of ParallelCluster's log group.")
    deletion_policy: Literal["Delete", "Retain"] = Field(
        "Delete",
        description="What deleting the cluster stack does to the ParallelCluster cluster: Delete terminates it "
        "(data lives in the storage stack); Retain leaves it running, outside CloudFormation, with its node policies, "
        "placement groups and node assets bucket (delete those after pcluster delete-cluster).",
    )

    @field_validator("head_node_instance_type")
    @classmethod
    def _head_node_type(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and v not in catalog.cpu_types():
            raise ValueError(f"{v!r} is not a CPU instance type fmcluster knows; allowed: {', '.join(catalog.cpu_types())}")
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        if v not in LOG_RETENTION_DAYS:
            raise ValueError(f"{v} is not a retention ParallelCluster accepts; allowed: "
                             f"{', '.join(map(str, LOG_RETENTION_DAYS))}")
        return v


class ParallelClusterOrchestrator(OrchestratorSettings):
    type: Literal["parallelcluster"] = "parallelcluster"
    parallelcluster: ParallelClusterSettings = Field(default_factory=ParallelClusterSettings)


def provider_template(region: str, version: str = PCLUSTER_VERSION) -> Tuple[str, str]:
    """(bucket, key) of the provider template of `version` in `region`."""
    return PROVIDER_BUCKET.format(region=region), PROVIDER_KEY.format(version=version)


def cluster_name(spec: ClusterSpec) -> str:
    return ParallelClusterOrchestrator.of(spec).parallelcluster.cluster_name or spec.name


def architecture(spec: ClusterSpec) -> str:
    """The compute nodes' architecture (the spec rules hold every queue to one)."""
    return spec.node_groups[0].instance.architecture


def head_node_instance_type(spec: ClusterSpec) -> str:
    return ParallelClusterOrchestrator.of(spec).parallelcluster.head_node_instance_type or DEFAULT_HEAD_NODE[architecture(spec)]


def compute_resource_name(group: NodeGroup) -> str:
    """`p5.48xlarge` -> `p5-48xlarge`: Slurm node names become `<queue>-st-p5-48xlarge-<n>`."""
    return group.instance_type.replace(".", "-")


def min_count(spec: ClusterSpec, group: NodeGroup) -> int:
    """MinCount: the queue's min_count where given, else the group's floor (count for a static group)."""
    queue = ParallelClusterOrchestrator.of(spec).parallelcluster.queues.get(group.name)
    return group.min_size if queue is None or queue.min_count is None else queue.min_count


def static_nodes(spec: ClusterSpec) -> Dict[str, int]:
    """The nodes of each queue that always run (MinCount): dynamic nodes power off when idle, so only static nodes
    are expected to report."""
    return {g.name: min_count(spec, g) for g in spec.node_groups}


def extra_instances(spec: ClusterSpec) -> List[ExtraInstance]:
    return [ExtraInstance(HEAD_NODE_GROUP, head_node_instance_type(spec))]


def spec_rules(spec: ClusterSpec) -> List[Problem]:
    settings = ParallelClusterOrchestrator.of(spec).parallelcluster
    at = "orchestrator.parallelcluster"
    found: List[Problem] = []
    name = cluster_name(spec)
    stacks = {spec.stack_name(part) for part in ("network", "storage", "observability", "cluster")}
    if name in stacks:
        found.append((f"{at}.cluster_name", f"{name!r} is the name of an fmcluster stack; ParallelCluster names its "
                      "own stack after the cluster, so pick a name that is none of " + ", ".join(sorted(stacks))))
    found += _network_problems(spec)
    found += _os_problems(spec)
    groups = {g.name: (i, g) for i, g in enumerate(spec.node_groups)}
    for i, g in enumerate(spec.node_groups):
        found += _queue_problems(spec, i, g)
    for key, queue in settings.queues.items():
        if key not in groups:
            found.append((f"{at}.queues.{key}", f"no node group named {key!r}; node groups: {', '.join(groups)}"))
            continue
        i, g = groups[key]
        if queue.min_count is not None and (g.min_count is not None or g.max_count is not None):
            found.append((f"{at}.queues.{key}.min_count", f"node_groups[{i}] gives its own range (min_count/max_count), "
                          "which every orchestrator reads: set the static nodes there and leave this out"))
        elif queue.min_count is not None and queue.min_count > g.count:
            found.append((f"{at}.queues.{key}.min_count", f"{queue.min_count} exceeds the group's count {g.count}"))
        if queue.min_count is not None and g.capacity.type == "capacity-block" and queue.min_count != g.count:
            found.append((f"{at}.queues.{key}.min_count", "a Capacity Block queue is all static nodes (ParallelCluster "
                          f"requires MinCount == MaxCount); use {g.count} or leave min_count out"))
    if spec.validation.level not in LEVELS:
        found.append(("validation.level", f"{spec.validation.level} does not fit ParallelCluster: the validator runs "
                      "inside each node's bootstrap, and creating the cluster waits for every static node's bootstrap "
                      "within CloudFormation's one-hour custom-resource wait (ServiceTimeout at most 3600 s), which a "
                      "deep run of up to 30 minutes per node after the head node and the launches does not reliably "
                      "fit; use standard or fast, and run the deep checks as a Slurm job once the nodes are up "
                      "(docs/parallelcluster.md)"))
    reserved = [k for k in spec.tags if k.startswith(RESERVED_TAG_PREFIX)]
    if reserved:
        found.append(("tags", f"{', '.join(reserved)}: ParallelCluster reserves the prefix {RESERVED_TAG_PREFIX}"))
    for key, section in spec.storage.store_sections():  # what a store cannot do where ParallelCluster mounts it
        found += section.service_problems(PARALLELCLUSTER, f"storage.{key}")
    return found


def _network_problems(spec: ClusterSpec) -> List[Problem]:
    """The head node bootstraps against AWS APIs (CloudFormation, EC2, DynamoDB, S3) from the node subnet, which
    therefore needs a route out; fmcluster creates no interface endpoints for a subnet without one."""
    new, existing = spec.network.new_vpc, spec.network.existing_vpc
    if new is not None and not new.nat_gateway:
        return [("network.new_vpc.nat_gateway", "ParallelCluster's head node and compute nodes reach CloudFormation, "
                 "EC2, DynamoDB and S3 from the node subnet, which without a NAT gateway has no route out; set "
                 "nat_gateway: true")]
    if existing is not None and not existing.route_table_ids:
        return [("network.existing_vpc.route_table_ids", "required with orchestrator parallelcluster: the head "
                 "node's subnet must route to AWS APIs (a default route to a NAT gateway); name the subnets' route "
                 "tables so preflight can check that route")]
    return []


def _os_problems(spec: ClusterSpec) -> List[Problem]:
    settings = ParallelClusterOrchestrator.of(spec).parallelcluster
    at = "orchestrator.parallelcluster"
    found: List[Problem] = []
    for i, g in enumerate(spec.node_groups):
        refused = UNSUPPORTED_OS_BY_FAMILY.get(g.instance.family, ())
        if settings.os in refused:
            allowed = [o for o in OPERATING_SYSTEMS if o not in refused]
            found.append((f"{at}.os", f"ParallelCluster does not support {g.instance_type} (node_groups[{i}]) on "
                          f"{settings.os}; use one of {', '.join(allowed)}"))
    if settings.os in NO_OFFICIAL_AMI and settings.custom_ami is None:
        found.append((f"{at}.custom_ami", f"required for {settings.os}: ParallelCluster publishes no official "
                      f"{settings.os} AMI; build one with pcluster build-image"))
    if settings.os in OLD_SYSTEM_PYTHON and settings.custom_ami is None and any(not g.ami_id for g in spec.node_groups):
        found.append((f"{at}.os", f"{settings.os}'s system python3 is 3.6 and fmcluster's node runtime needs 3.9+: "
                      "use a custom AMI with python3.9 or newer (custom_ami, or every group's ami_id), or another os"))
    if settings.os in RHEL_PLATFORM_OS:
        for i, g in enumerate(spec.node_groups):
            if g.capacity.type in ("capacity-block", "odcr"):
                found.append((f"node_groups[{i}].capacity.type", f"{g.capacity.type} with os {settings.os} can never "
                              "deploy: ParallelCluster requires the reservation's platform to match the OS (Red Hat "
                              "Enterprise Linux for RHEL), and fmcluster reserves and checks Linux/UNIX capacity; "
                              f"use os {', '.join(o for o in OPERATING_SYSTEMS if o not in RHEL_PLATFORM_OS)} with "
                              "this reservation, or on-demand capacity for RHEL (docs/parallelcluster.md)"))
    arches = {g.instance.architecture for g in spec.node_groups}
    if len(arches) > 1:
        found.append(("node_groups", f"ParallelCluster runs one architecture per cluster; the groups mix "
                      f"{' and '.join(sorted(arches))}"))
    head = head_node_instance_type(spec)
    head_arch = catalog.get(head).architecture
    if len(arches) == 1 and head_arch not in arches:
        found.append((f"{at}.head_node_instance_type", f"{head} is {head_arch}; the head node must match the "
                      f"compute nodes' {architecture(spec)} (e.g. {DEFAULT_HEAD_NODE[architecture(spec)]})"))
    return found


def _queue_problems(spec: ClusterSpec, i: int, g: NodeGroup) -> List[Problem]:
    found: List[Problem] = []
    if len(g.name) > MAX_QUEUE_NAME or g.name in RESERVED_QUEUE_NAMES:
        found.append((f"node_groups[{i}].name", f"the group is a ParallelCluster queue: at most {MAX_QUEUE_NAME} "
                      "characters and not 'default'"))
    if g.efa_enabled and g.placement_strategy == "none" and g.existing_placement_group is None \
            and g.capacity.type == "on-demand":
        found.append((f"node_groups[{i}].placement.strategy", "an EFA queue on ParallelCluster gets a placement "
                      "group unless its reservation places the nodes (capacity-block, or odcr); use cluster or "
                      "partition, name yours with existing_group, or leave placement out"))
    return found


def spec_warnings(spec: ClusterSpec) -> List[SpecWarning]:
    """fail on a group that runs the official AMI, and static on-demand GPU nodes in one placement group."""
    from fmcluster.spec.placement_advice import on_demand_together

    found: List[SpecWarning] = []
    custom_ami = orchestrator_settings(spec.orchestrator, ParallelClusterOrchestrator).parallelcluster.custom_ami
    official = [g.name for g in spec.node_groups if g.instance.is_gpu and not g.ami_id and custom_ami is None]
    if spec.validation_policy == "fail" and official:
        found.append(SpecWarning("validation.policy", (
            f"fail on the official ParallelCluster AMI ({', '.join(official)}): its versions come from release notes, "
            "not from an inspected AMI (docs/validation.md, \"Each orchestrator's default AMI\"), and a check that "
            "misjudges it fails every node's bootstrap, so creation waits until protected mode stops the queue and "
            "rolls back. Deploy first with policy report (the default), read a node's report (fmcluster status), "
            "then set fail")))
    found += on_demand_together(spec, static_nodes(spec), (
        "creation waits for every static node within the head node's wait, and one that cannot launch rolls the "
        "whole creation back (docs/parallelcluster.md, \"Preflight and status\")"))
    return found


"""The whole spec: a GPU training cluster on AWS, and the rules that span its sections."""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, FrozenSet, List, Mapping, Optional, Tuple, Type

from pydantic import Field, field_validator, model_validator

from fmcluster.runtime.contract import NODE_AGENTS
from fmcluster.runtime.profile import POLICIES as VALIDATION_POLICIES
from fmcluster.spec import checkpoints as checkpoint_rules
from fmcluster.spec import regions
from fmcluster.spec import serving as serving_rules
from fmcluster.spec.base import Problem, SpecModel, raise_problems
from fmcluster.spec.checkpoints import Checkpoints
from fmcluster.spec.network import (
    IP_HEADROOM_FACTOR,
    IP_HEADROOM_FIXED,
    SUBNET_RESERVED_IPS,
    Network,
    default_node_subnet_prefix,
    private_subnet_prefix,
    usable_addresses,
)
from fmcluster.spec.node_group import MAX_NODE_GROUPS, NODE_GROUPS_WHY, NodeGroup
from fmcluster.spec.node_units import NodeUnit, Resources
from fmcluster.spec.observability import Observability
from fmcluster.spec.orchestrator import DLAMI, BilledService, ExtraInstance, JobImage, OrchestratorSettings, SpecWarning
from fmcluster.spec.serving import Serving
from fmcluster.spec.storage import BOOT_ONLY, MOUNT_FORMS, Storage
from fmcluster.spec.tags import MAX_USER_TAGS, tag_problems
from fmcluster.spec.validation import Validation

SCHEMA_URL = "../schema/cluster.schema.json"

# Regions that offer P5/P6 families or that teams run controllers in; the AZ rule below
# is what matters (an AZ name is its region plus one letter).
REGION_PATTERN = r"^(us|eu|ap|sa|ca|me|af|il|mx)-(north|south|east|west|central|northeast|southeast|southwest|northwest)-[1-9]$"
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,23}[a-z0-9]$"



@dataclass(frozen=True)
class NodeTraits:
    """How a kind runs its nodes.

    :param agent: ``slurm`` | ``kubernetes`` | None: what the boot validator's drain or taint waits for.
    :param capacity_types: the node groups' ``capacity.type`` values it accepts.
    :param in_account: its instances run in this account, so EC2 On-Demand quotas apply (HyperPod's run in a SageMaker
        service account and use SageMaker quotas instead).
    :param image_family: node groups boot from fmcluster's launch templates, so ``image_family`` decides their root
        device and default image (False where the service picks the image: HyperPod, ParallelCluster, EKS).
    :param places_instances: fmcluster creates the groups' placement groups (``NodeGroup.placement_strategy``); False
        where the service places its instances itself and no placement group is created (HyperPod).
    :param addresses: VPC addresses each node takes beyond its IP-consuming interfaces (pod addresses under the VPC
        CNI); the spec checks the node subnet holds them (the subnet's size never depends on them).
    :param elastic: it honours node groups' ``min_count``/``max_count`` (a scaler or the scheduler starts and stops
        nodes within the range); kinds that do may refuse some ranges in ``spec_rules``.
    :param elastic_note: why it takes no elastic groups, with a public source (said when a spec asks for one).
    :param resource_types: the CloudFormation types its nodes live in (``fmcluster diff`` asks the kind for their
        `node_units`).
    """

    agent: Optional[str]
    capacity_types: FrozenSet[str]
    in_account: bool = True
    image_family: bool = True
    places_instances: bool = True
    addresses: int = 0
    elastic: bool = False
    elastic_note: str = ""
    resource_types: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.agent is not None and self.agent not in NODE_AGENTS:
            raise ValueError(f"nodes.agent: {self.agent!r} is not one of {', '.join(NODE_AGENTS)} or None")


@dataclass(frozen=True)
class ValidationTraits:
    """What a failed boot validation may do on a kind's nodes.

    :param policies: the ``validation.policy`` values it takes, its default first; the spec refuses the others.
    :param policy_note: why the policies it does not take do not apply (said when the spec asks for one).
    """

    policies: Tuple[str, ...] = ("drain", "fail", "report")
    policy_note: str = ""

    def __post_init__(self) -> None:
        if not self.policies or set(self.policies) - set(VALIDATION_POLICIES):
            raise ValueError(f"validation.policies: {self.policies!r} must name some of "
                             f"{', '.join(VALIDATION_POLICIES)}")


@dataclass(frozen=True)
class StorageTraits:
    """How a kind mounts the shared stores and where its jobs may checkpoint.

    :param mount_forms: alternatives, each the storage contract's forms it needs together (``spec.storage.MOUNT_FORMS``;
        default: boot lines in the nodes' user data). The spec refuses a store section whose forms hold none of them.
    :param checkpoint_tiers: the ``checkpoints.tier`` values it honours; the spec refuses the others. Default: the
        tiers on shared and node-local storage; a tier a service provides (managed: HyperPod on EKS) only where declared.
    :param checkpoint_tier_note: why it cannot honour the tiers it does not take (default: each tier's own reason).
    """

    mount_forms: Tuple[FrozenSet[str], ...] = BOOT_ONLY
    checkpoint_tiers: FrozenSet[str] = checkpoint_rules.DEFAULT_TIERS
    checkpoint_tier_note: str = ""

    def __post_init__(self) -> None:
        known = checkpoint_rules.known_tiers()
        if not self.checkpoint_tiers or set(self.checkpoint_tiers) - set(known):
            raise ValueError(f"storage.checkpoint_tiers: {sorted(self.checkpoint_tiers)!r} must name some of "
                             f"{', '.join(known)}")
        if not self.mount_forms or any(not f or f - set(MOUNT_FORMS) for f in self.mount_forms):
            raise ValueError(f"storage.mount_forms: each alternative names some of {', '.join(MOUNT_FORMS)}")


@dataclass(frozen=True)
class OrchestratorTraits:
    """An orchestrator kind as data, in named groups, and the facts it derives from a spec.

    :param name: the value of ``orchestrator.type``.
    :param summary: one line for the schema and the docs.
    :param settings: the pydantic model of its ``orchestrator`` section.
    :param nodes: how it runs its nodes (`NodeTraits`).
    :param validation: what a failed boot validation may do there (`ValidationTraits`).
    :param storage: how it mounts stores and where jobs checkpoint (`StorageTraits`).
    :param job_image: what its nodes' default image holds for the first job (`fmcluster job nccl`): where nccl-tests
        are, or that the job builds them on shared storage (default: fmcluster's launch templates' Deep Learning AMI).
    :param rule_groups: extra alert rule files the observability stack adds for this kind, by name:
        ``fmcluster/observability/rules.<name>.yaml`` (rules on metrics only this kind produces).
    :param price_keys: the keys of the planner's prices (planner/data/prices.json ``services``) its ``billed_services``
        may name; a test holds them to the data, and ``plan`` says "no price" for a key the data lacks.

    The methods below are a kind's facts that depend on the spec; a kind overrides those that differ.
    """

    name: str
    summary: str
    settings: Type[OrchestratorSettings]
    nodes: NodeTraits
    validation: ValidationTraits = ValidationTraits()
    storage: StorageTraits = StorageTraits()
    job_image: JobImage = DLAMI
    rule_groups: Tuple[str, ...] = ()
    price_keys: FrozenSet[str] = frozenset()

    def __post_init__(self) -> None:
        declared = self.settings.model_fields["type"].annotation
        if getattr(declared, "__args__", None) != (self.name,):
            raise ValueError(f"settings: {self.settings.__name__}.type must be Literal[{self.name!r}]")

    def spec_rules(self, spec: ClusterSpec) -> List[Problem]:
        """Problems a spec has with this kind, as (field path from the spec's top, message)."""
        return []

    def extra_instances(self, spec: ClusterSpec) -> List[ExtraInstance]:
        """Instances it runs beside the node groups (quotas, ``plan``, inventory alerts)."""
        return []

    def billed_services(self, spec: ClusterSpec) -> List[BilledService]:
        """Services it runs that bill by the hour beside the instances (``plan``'s cost), each under one of its
        ``price_keys``."""
        return []

    def spec_warnings(self, spec: ClusterSpec) -> List[SpecWarning]:
        """What a valid spec of this kind does that costs or risks more than expected (``validate`` prints them)."""
        return []

    def node_units(self, stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
        """The node groups one of its resources declares (a resource of a type in ``nodes.resource_types``), for
        ``fmcluster diff`` to compare: `resources` is the whole template's, for what the resource refers to."""
        return []

    def expected_nodes(self, spec: ClusterSpec) -> Dict[str, int]:
        """Node group name -> how many of its nodes are expected up and reporting (the inventory alerts compare the
        nodes that report with it). Default: every node of a static group, the floor (min_count) of an elastic one. A
        kind whose nodes start only for jobs expects only those that always run."""
        return {g.name: g.min_size for g in spec.node_groups}

    def describe(self, spec: ClusterSpec) -> str:
        """One line on what this spec's orchestrator runs, naming its choices (the diagram's box); default: summary."""
        return self.summary

    def plan_notes(self, spec: ClusterSpec) -> List[str]:
        """Lines ``fmcluster plan`` prints about the orchestrator (what it runs, what CloudFormation cannot build)."""
        return []


class ClusterSpec(SpecModel):
    """A GPU training cluster on AWS."""

    # A spec is validated against the subclass `fmcluster.spec.loading.spec_model` makes for the orchestrator kinds it
    # is given: its ``orchestrator`` takes their settings, told apart by ``type``; ``kinds`` holds their traits (the
    # first is the default). A spec that was read is an instance of its own kind's subclass (`loading.parse_spec`),
    # whose ``kinds`` holds that kind alone. The docstring above is the JSON Schema's description.
    kinds: ClassVar[Mapping[str, OrchestratorTraits]] = {}
    # the registered stores (`fmcluster.platforms.storage.Store`), whether the spec configures them or not: what a kind
    # reads of a store it installs for every cluster (a CSI driver's node plugin) without naming it
    stores: ClassVar[Tuple[Any, ...]] = ()

    name: str = Field(
        pattern=NAME_PATTERN,
        description="DNS-safe: 2-25 lower-case letters, digits and hyphens, starting with a letter; prefixes every stack",
    )
    region: str = Field(pattern=REGION_PATTERN, description="an AWS region code, e.g. us-east-1")
    availability_zone: str = Field(
        description="The one AZ the GPU nodes (and the shared stores built in one zone) live in, e.g. us-east-1a.")
    account: Optional[str] = Field(
        None, pattern=r"^\d{12}$", description="a 12-digit account id; absent: environment-agnostic synthesis"
    )
    tags: Dict[str, str] = Field(default_factory=dict, description=f"Tags on every resource (at most {MAX_USER_TAGS}; "
                                 f"AWS's rules on keys and values apply).")
    network: Network = Field(default_factory=Network)
    node_groups: List[NodeGroup] = Field(min_length=1, max_length=MAX_NODE_GROUPS,
                                         description=f"1 to {MAX_NODE_GROUPS} groups ({NODE_GROUPS_WHY}).")
    storage: Storage = Field(default_factory=Storage)
    orchestrator: OrchestratorSettings = Field(description="the orchestrator kind's section, by type")
    observability: Observability = Field(default_factory=Observability)
    validation: Validation = Field(default_factory=Validation)
    checkpoints: Optional[Checkpoints] = Field(
        None, description="Where training jobs write checkpoints (docs/checkpoints.md); absent: the example jobs' "
                          "defaults, and `plan` shows every tier.")
    serving: Optional[Serving] = Field(
        None, description="Models served with vLLM or SGLang on the Kubernetes kinds (docs/serving.md).")

    @field_validator("region")
    @classmethod
    def _known_region(cls, v: str) -> str:
        # the pattern admits names AWS never made (us-west-9); the partition data says which exist
        if v not in regions.known():
            raise ValueError(regions.unknown_region(v))
        return v

    @model_validator(mode="before")
    @classmethod
    def _orchestrator_type_defaults_to_the_first_kind(cls, data: Any) -> Any:
        orchestrator = data.get("orchestrator") if isinstance(data, dict) else None
        if isinstance(orchestrator, dict) and "type" not in orchestrator and cls.kinds:
            data = {**data, "orchestrator": {"type": next(iter(cls.kinds)), **orchestrator}}
        return data

    @model_validator(mode="after")
    def _cross_field(self) -> ClusterSpec:
        found: List[Problem] = []
        if not re.fullmatch(re.escape(self.region) + r"[a-z]", self.availability_zone):
            found.append(("availability_zone", f"{self.availability_zone!r} is not in region {self.region} "
                          f"(expected {self.region} plus one letter, e.g. {self.region}a)"))
        seen = set()
        for i, g in enumerate(self.node_groups):
            if g.name in seen:
                found.append((f"node_groups[{i}].name", f"{g.name!r} is used by another node group; names are unique"))
            seen.add(g.name)
            arn = g.capacity.training_plan_arn
            if arn and arn.split(":")[3] != self.region:
                found.append((f"node_groups[{i}].capacity.training_plan_arn",
                              f"the plan is in {arn.split(':')[3]}, the cluster in {self.region}"))
        found += tag_problems(self.tags)
        found += self._address_problems()
        found += self._orchestrator_problems()
        found += self._storage_problems()
        found += checkpoint_rules.problems(self)
        found += serving_rules.problems(self)
        raise_problems(found)
        return self

    def _orchestrator_problems(self) -> List[Problem]:
        """What the orchestrator kind accepts (capacity types, node agent), then the kind's own rules."""
        kind = self.orchestrator_kind
        found: List[Problem] = []
        for i, g in enumerate(self.node_groups):
            if kind.nodes.image_family:
                found += [(f"node_groups[{i}].{path}", msg) for path, msg in g.image_problems()]
            if g.capacity.type not in kind.nodes.capacity_types:
                hint = ""
                if g.capacity.type == "training-plan":
                    hint = " (training plans are SageMaker HyperPod capacity)"
                elif g.capacity.type == "capacity-block" and "training-plan" in kind.nodes.capacity_types:
                    hint = ("; its reserved capacity is a SageMaker training plan for the same instances and window "
                            "(docs/capacity.md), or keep the block with an orchestrator that takes capacity-block")
                found.append((f"node_groups[{i}].capacity.type", f"orchestrator {kind.name} takes "
                              f"{', '.join(sorted(kind.nodes.capacity_types))}, not {g.capacity.type}{hint}"))
            if g.elastic and not kind.nodes.elastic:
                at = "max_count" if g.max_count is not None else "min_count"
                note = f": {kind.nodes.elastic_note}" if kind.nodes.elastic_note else ""
                found.append((f"node_groups[{i}].{at}", f"orchestrator {kind.name} takes no elastic node groups"
                              f"{note}; leave min_count and max_count out (docs/resilience.md)"))
        policy = self.validation.policy
        if policy is not None and policy not in kind.validation.policies:
            note = f" ({kind.validation.policy_note})" if kind.validation.policy_note else ""
            found.append(("validation.policy", f"{policy} does not apply to orchestrator {kind.name}{note}; use "
                          f"{' or '.join(kind.validation.policies)} (default {kind.validation.policies[0]})"))
        found += checkpoint_rules.refused(self, kind.storage.checkpoint_tiers, kind.storage.checkpoint_tier_note)
        return found + kind.spec_rules(self)

    @property
    def validation_policy(self) -> str:
        """What a failed boot validation does on this cluster's nodes: the spec's policy, or the orchestrator's."""
        return self.validation.policy or self.orchestrator_kind.validation.policies[0]

    @property
    def orchestrator_kind(self) -> OrchestratorTraits:
        """The traits of the spec's orchestrator kind."""
        return type(self).kinds[self.orchestrator.type]

    def placement_of(self, group: NodeGroup) -> str:
        """The placement group the stacks create for a group: cluster, partition, or none."""
        return group.placement_strategy if self.orchestrator_kind.nodes.places_instances else "none"

    def _storage_problems(self) -> List[Problem]:
        found: List[Problem] = []
        kind = self.orchestrator_kind
        for key, section in self.storage.store_sections():
            if not any(needed <= section.forms for needed in kind.storage.mount_forms):
                ways = " or ".join(" and ".join(sorted(f)) for f in kind.storage.mount_forms)
                found.append((f"storage.{key}", f"orchestrator {kind.name} mounts a store through {ways}; this store "
                              f"offers {', '.join(sorted(section.forms)) or 'none'} (docs/storage.md)"))
                continue
            found += section.spec_rules(self, f"storage.{key}")
        return found

    def _address_problems(self) -> List[Problem]:
        """The node subnet holds what this orchestrator's nodes take; the second AZ is another AZ of the Region."""
        need = self.required_ips
        new, existing = self.network.new_vpc, self.network.existing_vpc
        found: List[Problem] = []
        if new is not None:
            vpc = ipaddress.IPv4Network(new.cidr)
            prefix = self.node_subnet_prefix or 0
            at = "network.new_vpc.node_subnet_prefix" if new.node_subnet_prefix is not None else "network.new_vpc.cidr"
            if prefix <= vpc.prefixlen:
                found.append((at, f"a /{prefix} node subnet does not fit in {new.cidr} beside the VPC's first /24 "
                              f"(public, storage and second-AZ subnets): use /{vpc.prefixlen + 1} or longer"))
            elif usable_addresses(prefix) < need:
                fit = private_subnet_prefix(need)
                if usable_addresses(fit) < need or fit <= vpc.prefixlen:
                    found.append(("network.new_vpc.cidr", f"the nodes need {need} addresses ({self._need_words()}), "
                                  f"more than half of {new.cidr} holds; use a larger CIDR"))
                else:
                    found.append(("network.new_vpc.node_subnet_prefix", f"the nodes need {need} addresses "
                                  f"({self._need_words()}), a /{prefix} node subnet holds {usable_addresses(prefix)}: "
                                  f"set node_subnet_prefix: {fit} or shorter (a new size replaces the node subnet "
                                  "and every node in it: set it before the nodes exist)"))
            zone = self.second_availability_zone
            if not re.fullmatch(re.escape(self.region) + r"[a-z]", zone) or zone == self.availability_zone:
                found.append(("network.new_vpc.second_availability_zone", f"{zone!r} must be another AZ of "
                              f"{self.region} than the GPU AZ {self.availability_zone}"))
        elif existing is not None and existing.subnet_cidrs:
            usable = sum(ipaddress.IPv4Network(c).num_addresses - SUBNET_RESERVED_IPS for c in existing.subnet_cidrs)
            if usable < need:
                found.append(("network.existing_vpc.subnet_cidrs", f"{usable} usable addresses, but the nodes need "
                              f"{need} ({self._need_words()}); use larger subnets"))
        return found

    def _need_words(self) -> str:
        per_node = self.orchestrator_kind.nodes.addresses
        pods = f", {per_node} pod addresses per node under {self.orchestrator.type}" if per_node else ""
        return f"count x IP-consuming interfaces{pods}, plus headroom"

    @property
    def node_subnet_prefix(self) -> Optional[int]:
        """The new VPC's node subnet prefix: the spec's, else the VPC's default; None with an existing VPC. Never
        a function of the orchestrator or the node counts, so neither a switch nor a scale-up replaces the subnet."""
        new = self.network.new_vpc
        if new is None:
            return None
        return new.node_subnet_prefix or default_node_subnet_prefix(new.cidr)

    @property
    def second_availability_zone(self) -> str:
        """The AZ of the new VPC's second-AZ subnet: the spec's, else ``<region>a`` (``<region>b`` when the GPUs are
        in a)."""
        new = self.network.new_vpc
        if new is not None and new.second_availability_zone:
            return new.second_availability_zone
        return self.region + ("b" if self.availability_zone.endswith("a") else "a")

    @property
    def node_ip_addresses(self) -> int:
        per_node = self.orchestrator_kind.nodes.addresses  # e.g. pod addresses under the VPC CNI
        return sum(g.ip_addresses + g.max_size * per_node for g in self.node_groups)

    @property
    def required_ips(self) -> int:
        return math.ceil(self.node_ip_addresses * IP_HEADROOM_FACTOR) + IP_HEADROOM_FIXED

    @property
    def gpu_groups(self) -> List[NodeGroup]:
        return [g for g in self.node_groups if g.role == "gpu"]

    def stack_name(self, part: str) -> str:
        return f"{self.name}-{part}"



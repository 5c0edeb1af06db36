"""The cluster spec: the one place user input is validated.

A spec is YAML the user writes (examples/*.yaml). `load_spec` turns it into a frozen
`ClusterSpec` or raises `SpecError` whose `problems` are one line each,
``field.path: what is wrong and what is allowed``. Unknown keys are errors so typos
never pass silently. Constructs trust a `ClusterSpec`; they re-validate nothing.
"""

from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from fmcluster import catalog
from fmcluster.spec_base import _Model, _problems
from fmcluster.spec_hyperpod import CONTROLLER_GROUP, LOGIN_GROUP, HyperPodSettings, offered_problem
from fmcluster.spec_storage import Storage

SCHEMA_URL = "../schema/cluster.schema.json"

# Regions that offer P5/P6 families or that teams run controllers in; the AZ rule below
# is what matters (an AZ name is its region plus one letter).
REGION_PATTERN = r"^(us|eu|ap|sa|ca|me|af|il|mx)-(north|south|east|west|central|northeast|southeast|southwest|northwest)-[1-9]$"
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,23}[a-z0-9]$"
GROUP_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$"
RESERVATION_ID_PATTERN = r"^cr-[0-9a-f]{17}$"
TRAINING_PLAN_ARN_PATTERN = r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[A-Za-z0-9-]{1,64}$"
AMI_PATTERN = r"^ami-[0-9a-f]{8,17}$"
VPC_ID_PATTERN = r"^vpc-[0-9a-f]{8,17}$"
SUBNET_ID_PATTERN = r"^subnet-[0-9a-f]{8,17}$"
ROUTE_TABLE_ID_PATTERN = r"^rtb-[0-9a-f]{8,17}$"

LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)

# Addresses AWS reserves in every subnet, and the slack we keep for controller, login,
# endpoints and rolling replacement on top of the nodes' own interfaces.
SUBNET_RESERVED_IPS = 5
IP_HEADROOM_FACTOR = 1.25
IP_HEADROOM_FIXED = 64


class SpecError(Exception):
    """Invalid spec input: `problems` holds one `path: message` line each."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


# --- network -------------------------------------------------------------------------


class NewVpc(_Model):
    """A VPC fmcluster creates: one public subnet (NAT egress) and one private subnet for
    the nodes, both in the GPU availability zone, the private one sized for the nodes."""

    cidr: str = Field("10.0.0.0/16", description="IPv4 CIDR of the new VPC, /16 to /24.")
    nat_gateway: bool = Field(True, description="NAT gateway for node egress (packages, containers, AWS APIs).")

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError as e:
            raise ValueError(f"not an IPv4 network CIDR ({e}); e.g. 10.0.0.0/16") from None
        if not 16 <= net.prefixlen <= 24:
            raise ValueError("the VPC prefix must be /16 to /24 (the range AWS allows)")
        if not net.is_private:
            raise ValueError("use a private (RFC 1918) range, e.g. 10.0.0.0/16")
        return str(net)


class ExistingVpc(_Model):
    """A VPC you already have, referenced by ids; nothing is looked up at synth."""

    vpc_id: str = Field(pattern=VPC_ID_PATTERN, description="expected vpc- and 8 or 17 hex digits")
    subnet_ids: List[str] = Field(min_length=1, description="Private subnet(s) in the GPU availability zone.")
    route_table_ids: List[str] = Field(
        default_factory=list, description="Route tables of those subnets; when given an S3 gateway endpoint is added."
    )
    subnet_cidrs: List[str] = Field(
        default_factory=list,
        description="The subnets' CIDRs, optional: when given, the spec checks they hold the nodes' addresses.",
    )

    @field_validator("subnet_ids")
    @classmethod
    def _subnets(cls, v: List[str]) -> List[str]:
        bad = [s for s in v if not re.match(SUBNET_ID_PATTERN, s)]
        if bad:
            raise ValueError(f"not subnet ids: {', '.join(bad)} (expected subnet-0123456789abcdef0)")
        if len(set(v)) != len(v):
            raise ValueError("subnet ids must be unique")
        return v

    @field_validator("route_table_ids")
    @classmethod
    def _rtbs(cls, v: List[str]) -> List[str]:
        bad = [s for s in v if not re.match(ROUTE_TABLE_ID_PATTERN, s)]
        if bad:
            raise ValueError(f"not route table ids: {', '.join(bad)} (expected rtb-0123456789abcdef0)")
        return v

    @field_validator("subnet_cidrs")
    @classmethod
    def _cidrs(cls, v: List[str]) -> List[str]:
        for c in v:
            try:
                ipaddress.IPv4Network(c, strict=True)
            except ValueError:
                raise ValueError(f"{c!r} is not an IPv4 network CIDR") from None
        return v

    @model_validator(mode="after")
    def _cidrs_match_subnets(self) -> ExistingVpc:
        if self.subnet_cidrs and len(self.subnet_cidrs) != len(self.subnet_ids):
            _problems([("subnet_cidrs", "when given, lists one CIDR per entry of subnet_ids")])
        return self


class Network(_Model):
    new_vpc: Optional[NewVpc] = None
    existing_vpc: Optional[ExistingVpc] = None
    flow_logs_retention_days: int = Field(90, description="CloudWatch Logs retention of VPC flow logs.")

    @field_validator("flow_logs_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        if v not in LOG_RETENTION_DAYS:
            raise ValueError(f"{v} is not a CloudWatch Logs retention; allowed: {', '.join(map(str, LOG_RETENTION_DAYS))}")
        return v

    @model_validator(mode="after")
    def _one_of(self) -> Network:
        if self.new_vpc is None and self.existing_vpc is None:
            object.__setattr__(self, "new_vpc", NewVpc())
        elif self.new_vpc is not None and self.existing_vpc is not None:
            _problems([("existing_vpc", "give either new_vpc or existing_vpc, not both")])
        return self


# --- node groups ---------------------------------------------------------------------


class Capacity(_Model):
    """Where the instances come from."""

    type: Literal["on-demand", "odcr", "capacity-block", "training-plan"] = "on-demand"
    reservation_id: Optional[str] = Field(
        None, description="cr-… id of the On-Demand Capacity Reservation or Capacity Block."
    )
    training_plan_arn: Optional[str] = Field(None, description="SageMaker HyperPod training plan ARN.")
    size: Optional[int] = Field(None, ge=1, description="Instances the reservation holds; the group count may not exceed it.")

    @model_validator(mode="after")
    def _ids(self) -> Capacity:
        found = []
        if self.type in ("odcr", "capacity-block"):
            if not self.reservation_id:
                found.append(("reservation_id", f"required for capacity type {self.type} (cr- and 17 hex digits)"))
            elif not re.match(RESERVATION_ID_PATTERN, self.reservation_id):
                found.append(
                    ("reservation_id", f"{self.reservation_id!r} is malformed; expected cr- and 17 hex digits")
                )
        elif self.reservation_id:
            found.append(("reservation_id", f"applies to odcr and capacity-block, not {self.type}"))
        if self.type == "training-plan":
            if not self.training_plan_arn or not re.match(TRAINING_PLAN_ARN_PATTERN, self.training_plan_arn):
                found.append(
                    ("training_plan_arn", "required for capacity type training-plan: "
                     "arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME")
                )
        elif self.training_plan_arn:
            found.append(("training_plan_arn", f"applies to capacity type training-plan, not {self.type}"))
        _problems(found)
        return self


class Placement(_Model):
    strategy: Literal["cluster", "partition", "none"] = Field(
        "cluster", description="cluster: one UltraCluster placement group; partition for very large fleets."
    )
    partitions: Optional[int] = Field(None, ge=1, le=7, description="Partition count (partition strategy only).")

    @model_validator(mode="after")
    def _partitions(self) -> Placement:
        if self.partitions is not None and self.strategy != "partition":
            _problems([("partitions", "applies to strategy partition only")])
        return self


class NodeGroup(_Model):
    name: str = Field(
        pattern=GROUP_NAME_PATTERN, description="2-32 lower-case letters, digits and hyphens, starting with a letter"
    )
    instance_type: str = Field(description="EC2 instance type (p5.48xlarge); HyperPod's ml. prefix is added for you.")
    count: int = Field(ge=1, le=2048, description="Instances in the group.")
    role: Literal["gpu", "cpu"] = Field("gpu", description="gpu groups must use a GPU instance type.")
    capacity: Capacity = Field(default_factory=Capacity)
    efa: Optional[bool] = Field(None, description="Attach EFA; default on when the instance type supports it.")
    placement: Optional[Placement] = Field(
        None, description="Default: cluster placement group for EFA groups, none with a Capacity Block."
    )
    ami_id: Optional[str] = Field(
        None, pattern=AMI_PATTERN, description="AMI override, ami- and 8 or 17 hex digits (default: DLAMI via SSM)"
    )
    root_volume_gib: int = Field(200, ge=100, le=16384, description="Encrypted gp3 root volume.")

    @field_validator("instance_type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        v = catalog.strip_hyperpod_prefix(v)
        if v not in catalog.all_types():
            raise ValueError(
                f"unknown instance type {v!r}; allowed: GPU {', '.join(catalog.gpu_types())}; "
                f"CPU {', '.join(catalog.cpu_types())}"
            )
        return v

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.get(self.instance_type)

    @property
    def efa_enabled(self) -> bool:
        return self.instance.efa_supported if self.efa is None else self.efa

    @property
    def placement_strategy(self) -> str:
        if self.placement is not None:
            return self.placement.strategy
        if self.capacity.type == "capacity-block" or not self.efa_enabled:
            return "none"
        return "cluster"

    @property
    def ip_addresses(self) -> int:
        return self.count * self.instance.ip_interfaces

    @model_validator(mode="after")
    def _consistent(self) -> NodeGroup:
        t = self.instance
        found = []
        if self.role == "gpu" and not t.is_gpu:
            found.append(("instance_type", f"role gpu needs a GPU instance type; {self.instance_type} has none "
                          f"(allowed: {', '.join(catalog.gpu_types())}; or set role: cpu)"))
        if self.efa and not t.efa_supported:
            found.append(("efa", f"{self.instance_type} has no EFA; set efa: false or use an EFA instance type"))
        if self.capacity.type == "capacity-block" and self.placement and self.placement.strategy != "none":
            found.append(("placement.strategy", "a Capacity Block cannot be combined with a placement group "
                          "(AWS places Capacity Block instances itself); use none or leave placement out"))
        if self.capacity.size is not None and self.count > self.capacity.size:
            found.append(("count", f"{self.count} exceeds capacity.size {self.capacity.size} of the reservation"))
        _problems(found)
        return self


# --- sections later layers extend ----------------------------------------------------


class PcsSettings(_Model):
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

    @field_validator("login_instance_type")
    @classmethod
    def _login_type(cls, v: str) -> str:
        if v not in catalog.all_types():
            raise ValueError(f"unknown instance type {v!r}; allowed: {', '.join(catalog.cpu_types())}")
        return v


PCS_MAX_NODES = {"SMALL": 32, "MEDIUM": 512, "LARGE": 2048}


class Orchestrator(_Model):
    type: Literal["none", "pcs", "hyperpod-slurm"] = Field(
        "none",
        description="none: network, placement groups and launch templates only (bring your own scheduler); "
        "pcs: AWS Parallel Computing Service (Slurm); hyperpod-slurm: SageMaker HyperPod with Slurm.",
    )
    pcs: PcsSettings = Field(default_factory=PcsSettings)
    hyperpod: HyperPodSettings = Field(default_factory=HyperPodSettings)

    def pcs_size(self, nodes: int) -> str:
        if self.pcs.size:
            return self.pcs.size
        return next(size for size, limit in PCS_MAX_NODES.items() if nodes <= limit or size == "LARGE")

    @property
    def is_hyperpod(self) -> bool:
        return self.type.startswith("hyperpod")

    @model_validator(mode="after")
    def _sections_match_type(self) -> Orchestrator:
        found = []
        for section, kind in (("pcs", "pcs"), ("hyperpod", "hyperpod-slurm")):
            if section in self.model_fields_set and self.type != kind:
                found.append((section, f"applies to orchestrator type {kind}, not {self.type}"))
        _problems(found)
        return self


class Observability(_Model):
    enabled: bool = Field(True, description="Deploy the observability stack (AMP, alerts, dashboards).")
    alert_emails: List[str] = Field(default_factory=list, description="Addresses subscribed to the alert topic.")
    grafana: bool = Field(False, description="Amazon Managed Grafana workspace (sign-in via IAM Identity Center).")
    scrape_interval_seconds: int = Field(30, ge=10, le=300, description="How often node collectors scrape.")

    @field_validator("alert_emails")
    @classmethod
    def _emails(cls, v: List[str]) -> List[str]:
        bad = [e for e in v if not re.match(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", e)]
        if bad:
            raise ValueError(f"not e-mail addresses: {', '.join(bad)}")
        return v


class Validation(_Model):
    """How nodes check their software stack at boot, and what a failure does."""

    level: Literal["fast", "standard", "deep"] = Field(
        "standard", description="fast: sysfs/procfs; standard: + one call of each tool; deep: + DCGM, GEMM, NCCL."
    )
    policy: Literal["fail", "drain", "taint", "report"] = Field(
        "drain", description="fail stops provisioning; drain (Slurm) / taint (Kubernetes) keep the node out of work."
    )


# --- the whole spec -------------------------------------------------------------------


class ClusterSpec(_Model):
    """A GPU training cluster on AWS."""

    name: str = Field(
        pattern=NAME_PATTERN,
        description="DNS-safe: 2-25 lower-case letters, digits and hyphens, starting with a letter; prefixes every stack",
    )
    region: str = Field(pattern=REGION_PATTERN, description="an AWS region code, e.g. us-east-1")
    availability_zone: str = Field(description="The one AZ the GPU nodes (and FSx) live in, e.g. us-east-1a.")
    account: Optional[str] = Field(
        None, pattern=r"^\d{12}$", description="a 12-digit account id; absent: environment-agnostic synthesis"
    )
    tags: Dict[str, str] = Field(default_factory=dict, description="Tags on every resource.")
    network: Network = Field(default_factory=Network)
    node_groups: List[NodeGroup] = Field(min_length=1)
    storage: Storage = Field(default_factory=Storage)
    orchestrator: Orchestrator = Field(default_factory=Orchestrator)
    observability: Observability = Field(default_factory=Observability)
    validation: Validation = Field(default_factory=Validation)

    @model_validator(mode="after")
    def _cross_field(self) -> ClusterSpec:
        found: List[Tuple[str, str]] = []
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
        found += self._address_problems()
        found += self._orchestrator_problems()
        found += self._storage_problems()
        if self.validation.policy == "taint" and not self.orchestrator.type.endswith("eks"):
            found.append(("validation.policy", f"taint applies to Kubernetes nodes; orchestrator {self.orchestrator.type} "
                          "has none: use drain (Slurm), fail or report"))
        _problems(found)
        return self

    def _orchestrator_problems(self) -> List[Tuple[str, str]]:
        found: List[Tuple[str, str]] = []
        kind = self.orchestrator.type
        for i, g in enumerate(self.node_groups):
            if g.capacity.type == "training-plan" and kind in ("none", "pcs"):
                found.append((f"node_groups[{i}].capacity.type", f"training plans are HyperPod capacity; "
                              f"orchestrator {kind} takes on-demand, odcr or capacity-block"))
            if kind == "pcs" and (len(g.name) > 25 or (len(g.name) == 10 and g.name.isalnum())):
                found.append((f"node_groups[{i}].name", "PCS node group and queue names are at most 25 characters "
                              "and never exactly 10 letters/digits (those look like PCS ids)"))
            if kind == "pcs" and not g.ami_id:
                found.append((f"node_groups[{i}].ami_id", "required with orchestrator pcs: a PCS-ready AMI (the PCS "
                              "agent and its Slurm build installed; see README 'PCS AMI')"))
        if self.orchestrator.is_hyperpod:
            found += self._hyperpod_problems()
        if kind == "pcs":
            nodes = sum(g.count for g in self.node_groups) + 1
            size = self.orchestrator.pcs_size(nodes)
            if nodes > PCS_MAX_NODES[size]:
                found.append(("orchestrator.pcs.size", f"{size} manages up to {PCS_MAX_NODES[size]} instances; "
                              f"the spec has {nodes} (with the login node); use a larger size"))
            x86 = [g for g in self.node_groups if g.instance.architecture == "x86_64" and g.ami_id]
            if not self.orchestrator.pcs.login_ami_id and not x86:
                found.append(("orchestrator.pcs.login_ami_id", "required when no x86_64 node group has an ami_id"))
        return found

    def _storage_problems(self) -> List[Tuple[str, str]]:
        fsx = self.storage.fsx
        if fsx is None:
            return []
        found: List[Tuple[str, str]] = []
        if fsx.availability_zone and fsx.availability_zone != self.availability_zone:
            found.append(("storage.fsx.availability_zone", f"{fsx.availability_zone} is not the GPU nodes' "
                          f"{self.availability_zone}; cross-AZ Lustre traffic is slow and billed: leave it out"))
        if fsx.efa:
            for i, g in enumerate(self.node_groups):
                if g.role == "gpu" and not g.efa_enabled:
                    found.append((f"node_groups[{i}].efa", f"storage.fsx.efa needs EFA clients; group {g.name} "
                                  f"({g.instance_type}) has none: enable EFA there or set storage.fsx.efa: false"))
        return found

    def _hyperpod_problems(self) -> List[Tuple[str, str]]:
        found: List[Tuple[str, str]] = []
        for i, g in enumerate(self.node_groups):
            at = f"node_groups[{i}]"
            problem = offered_problem(g.instance_type)
            if problem:
                found.append((f"{at}.instance_type", problem))
            if g.name in (CONTROLLER_GROUP, LOGIN_GROUP):
                found.append((f"{at}.name", f"{g.name!r} is the HyperPod {g.name} group's name; pick another"))
            if g.capacity.type in ("odcr", "capacity-block"):
                found.append((f"{at}.capacity.type", "HyperPod takes on-demand or training-plan capacity "
                              f"(reserve with a SageMaker training plan), not {g.capacity.type}"))
            if g.ami_id:
                found.append((f"{at}.ami_id", "HyperPod runs its own DLAMI-based image; remove ami_id"))
            if g.placement is not None:
                found.append((f"{at}.placement", "HyperPod places instances itself; remove placement"))
        return found

    @property
    def login_ami_id(self) -> Optional[str]:
        if self.orchestrator.pcs.login_ami_id:
            return self.orchestrator.pcs.login_ami_id
        return next((g.ami_id for g in self.node_groups if g.instance.architecture == "x86_64" and g.ami_id), None)

    def _address_problems(self) -> List[Tuple[str, str]]:
        need = self.required_ips
        new, existing = self.network.new_vpc, self.network.existing_vpc
        if new is not None:
            vpc = ipaddress.IPv4Network(new.cidr)
            # the private node subnet takes at most half of the VPC; the rest is public/NAT and spare
            if private_subnet_prefix(need) <= vpc.prefixlen or 2 ** (32 - vpc.prefixlen - 1) - SUBNET_RESERVED_IPS < need:
                return [("network.new_vpc.cidr", f"the nodes need {need} addresses (count x IP-consuming "
                         f"interfaces plus headroom), more than half of {new.cidr} holds; use a larger CIDR")]
        elif existing is not None and existing.subnet_cidrs:
            usable = sum(ipaddress.IPv4Network(c).num_addresses - SUBNET_RESERVED_IPS for c in existing.subnet_cidrs)
            if usable < need:
                return [("network.existing_vpc.subnet_cidrs", f"{usable} usable addresses, but the nodes need "
                         f"{need} (count x IP-consuming interfaces, plus headroom); use larger subnets")]
        return []

    @property
    def node_ip_addresses(self) -> int:
        return sum(g.ip_addresses for g in self.node_groups)

    @property
    def required_ips(self) -> int:
        return math.ceil(self.node_ip_addresses * IP_HEADROOM_FACTOR) + IP_HEADROOM_FIXED

    @property
    def gpu_groups(self) -> List[NodeGroup]:
        return [g for g in self.node_groups if g.role == "gpu"]

    def stack_name(self, part: str) -> str:
        return f"{self.name}-{part}"


def private_subnet_prefix(required_ips: int) -> int:
    """Smallest subnet (largest prefix, at most /24, at least /16) holding `required_ips`."""
    prefix = 24
    while prefix > 16 and (2 ** (32 - prefix) - SUBNET_RESERVED_IPS) < required_ips:
        prefix -= 1
    return prefix


# --- loading and error formatting -----------------------------------------------------


def _format_loc(loc: Tuple[Union[str, int], ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "tagged-union", "literal")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _allowed_keys(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def _model_at(loc: Tuple[Union[str, int], ...]) -> Optional[type[BaseModel]]:
    """The pydantic model that owns the mapping at `loc` (for 'unknown key' hints)."""
    model: Any = ClusterSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        ann = field.annotation
        for arg in getattr(ann, "__args__", ()) or (ann,):
            for inner in getattr(arg, "__args__", ()) or (arg,):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    model = inner
                    break
            else:
                continue
            break
        else:
            return None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def format_validation_error(err: ValidationError) -> List[str]:
    lines = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        path = _format_loc(loc)
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            owner = _model_at(loc[:-1])
            allowed = f"; allowed keys: {_allowed_keys(owner)}" if owner else ""
            msg = f"unknown key{allowed}"
        elif e["type"] == "missing":
            msg = "required"
        elif e["type"] == "string_pattern_mismatch":
            owner = _model_at(loc[:-1]) if loc and isinstance(loc[-1], str) else None
            info = owner.model_fields[str(loc[-1])].description if owner else None
            msg = f"{e.get('input')!r} is not allowed: {info or 'it must match ' + e['ctx']['pattern']}"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
            if msg.startswith("@"):
                for tagged in msg.split("\n"):
                    sub, _, text = tagged[1:].partition("@")
                    full = f"{path}.{sub}" if path != "(top level)" else sub
                    lines.append(f"{full.replace('.[', '[')}: {text}")
                continue
        lines.append(f"{path}: {msg}")
    return lines


def _yaml_loader() -> Any:
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return UniqueKeyLoader


def parse_spec(data: Any) -> ClusterSpec:
    if data is None:
        raise SpecError(["(top level): the spec is empty; expected a mapping with name, region, node_groups, ..."])
    if not isinstance(data, dict):
        raise SpecError([f"(top level): expected a mapping of keys, got a {type(data).__name__}"])
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(format_validation_error(e)) from None


def load_spec(path: Union[str, Path]) -> ClusterSpec:
    """Read and validate a spec file; every failure is a `SpecError`."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([f"{p}: no such file"]) from None
    except IsADirectoryError:
        raise SpecError([f"{p}: is a directory, expected a YAML file"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError([f"{p}: cannot read ({e})"]) from None
    try:
        data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError([f"{p}: not valid YAML{where}: {problem}"]) from None
    return parse_spec(data)


def json_schema() -> Dict[str, Any]:
    schema = ClusterSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "fmcluster cluster spec"
    return schema

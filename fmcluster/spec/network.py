"""The spec's `network` section, and the subnet arithmetic that checks the node subnet holds the nodes.

The network stack is long-lived: nothing in it depends on the orchestrator kind or on node counts, so switching
``orchestrator.type`` or scaling a group never replaces a subnet (docs/network.md)."""

from __future__ import annotations

import ipaddress
import re
from typing import List, Optional

from pydantic import Field, field_validator, model_validator

from fmcluster.spec.base import SpecModel, raise_problems

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

# The node subnet's default size, whatever the orchestrator and node counts: /20 (4,091 usable addresses) in a VPC of
# /19 or larger, else half the VPC. Sizes derived from counts or from the orchestrator's pod addresses changed the
# subnet's CIDR, which CloudFormation can only do by replacing the subnet and every node in it.
DEFAULT_NODE_SUBNET_PREFIX = 20
# The first /24 of a new VPC holds the public and storage /26s and the second-AZ /27s; the node subnet follows it.
NODE_SUBNET_MIN_PREFIX, NODE_SUBNET_MAX_PREFIX = 16, 24


class NewVpc(SpecModel):
    """A VPC fmcluster creates: in the GPU availability zone a public subnet (NAT egress), a storage subnet and the
    node subnet; a small private subnet in a second AZ (an EKS control plane and the AMP managed scraper need two
    AZs). The same subnets whatever the orchestrator, so switching it keeps them."""

    cidr: str = Field("10.0.0.0/16", description="IPv4 CIDR of the new VPC, /16 to /23.")
    nat_gateway: bool = Field(True, description="NAT gateway for node egress (packages, containers, AWS APIs).")
    node_subnet_prefix: Optional[int] = Field(
        None, description=f"Prefix length of the node subnet, /{NODE_SUBNET_MIN_PREFIX} to /{NODE_SUBNET_MAX_PREFIX} "
        f"(default /{DEFAULT_NODE_SUBNET_PREFIX}, or half a VPC smaller than /19). Independent of the orchestrator and "
        "the node counts; changing it replaces the node subnet and every node in it.")
    second_availability_zone: Optional[str] = Field(
        None, description="The AZ of the small private subnet beside the GPU AZ (an EKS control plane and the AMP "
        "scraper need two AZs; every orchestrator gets it, so a switch keeps it). Default: <region>a, or <region>b "
        "when the GPU AZ is a. Changing it replaces that subnet.")

    @field_validator("node_subnet_prefix")
    @classmethod
    def _node_prefix(cls, v: Optional[int]) -> Optional[int]:
        if v is not None and not NODE_SUBNET_MIN_PREFIX <= v <= NODE_SUBNET_MAX_PREFIX:
            raise ValueError(f"/{v} is outside /{NODE_SUBNET_MIN_PREFIX} to /{NODE_SUBNET_MAX_PREFIX}")
        return v

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError as e:
            raise ValueError(f"not an IPv4 network CIDR ({e}); e.g. 10.0.0.0/16") from None
        if not 16 <= net.prefixlen <= 23:
            raise ValueError("the VPC prefix must be /16 to /23 (AWS allows /16 to /28; the first /24 holds the "
                             "public, storage and second-AZ subnets and the node subnet follows it)")
        if not net.is_private:
            raise ValueError("use a private (RFC 1918) range, e.g. 10.0.0.0/16")
        return str(net)


class ExistingVpc(SpecModel):
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
    extra_subnet_ids: List[str] = Field(
        default_factory=list,
        description="Private subnets in other availability zones, with egress, for orchestrators that need a second "
        "AZ (an EKS control plane, the AMP managed scraper).",
    )

    @field_validator("subnet_ids", "extra_subnet_ids")
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
        found = []
        if self.subnet_cidrs and len(self.subnet_cidrs) != len(self.subnet_ids):
            found.append(("subnet_cidrs", "when given, lists one CIDR per entry of subnet_ids"))
        if set(self.extra_subnet_ids) & set(self.subnet_ids):
            found.append(("extra_subnet_ids", "are subnets in other availability zones, never the node subnets"))
        raise_problems(found)
        return self


class Network(SpecModel):
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
            raise_problems([("existing_vpc", "give either new_vpc or existing_vpc, not both")])
        return self


def private_subnet_prefix(required_ips: int) -> int:
    """Smallest subnet (largest prefix, at most /24, at least /16) holding `required_ips`."""
    prefix = NODE_SUBNET_MAX_PREFIX
    while prefix > NODE_SUBNET_MIN_PREFIX and usable_addresses(prefix) < required_ips:
        prefix -= 1
    return prefix


def usable_addresses(prefix: int) -> int:
    """Addresses a subnet of `prefix` offers its interfaces (AWS reserves five in every subnet)."""
    return 2 ** (32 - prefix) - SUBNET_RESERVED_IPS


def default_node_subnet_prefix(vpc_cidr: str) -> int:
    """The node subnet's size when the spec names none: a function of the VPC alone, never of the orchestrator or
    the node counts."""
    return max(DEFAULT_NODE_SUBNET_PREFIX, ipaddress.IPv4Network(vpc_cidr).prefixlen + 1)

"""The spec's `network` section, and the subnet arithmetic that sizes the node subnet."""

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


class NewVpc(SpecModel):
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
    prefix = 24
    while prefix > 16 and (2 ** (32 - prefix) - SUBNET_RESERVED_IPS) < required_ips:
        prefix -= 1
    return prefix

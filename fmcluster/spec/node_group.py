"""The spec's `node_groups`: instance type, count, capacity (on-demand, ODCR, Capacity Block, training
plan) and placement of each group of nodes."""

from __future__ import annotations

import re
from typing import List, Literal, Optional, Tuple, get_args

from pydantic import Field, field_validator, model_validator

from fmcluster import catalog, images
from fmcluster.runtime.contract import ec2_type
from fmcluster.spec.base import SpecModel, raise_problems

GROUP_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$"
RESERVATION_ID_PATTERN = r"^cr-[0-9a-f]{17}$"
TRAINING_PLAN_ARN_PATTERN = r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[A-Za-z0-9-]{1,64}$"
AMI_PATTERN = r"^ami-[0-9a-f]{8,17}$"
# One cluster stack holds every group's launch template, placement group and nodes. Measured with
# bench/template_growth.py (docs/architecture.md), a group adds at most about 21 KB, 3 resources and 2 outputs to the
# largest template, whose base is at most about 110 KB (EKS); CloudFormation takes a template of 1 MB (from S3), 500
# resources and 200 outputs per stack (CloudFormation quotas,
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html). 32 groups keep the
# largest template near 780 KB, three quarters of the size quota, which binds first (about 45 groups reach 1 MB).
MAX_NODE_GROUPS = 32
NODE_GROUPS_WHY = "one cluster stack must stay within CloudFormation's 1 MB, 500-resource and 200-output quotas"
# The largest group the spec takes (count, min_count, max_count).
MAX_GROUP_SIZE = 2048
CapacityType = Literal["on-demand", "odcr", "capacity-block", "training-plan"]
CAPACITY_TYPES = get_args(CapacityType)


class Capacity(SpecModel):
    """Where the instances come from."""

    type: CapacityType = "on-demand"
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
        raise_problems(found)
        return self


PLACEMENT_GROUP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$"


class Placement(SpecModel):
    strategy: Literal["cluster", "partition", "none"] = Field(
        "cluster", description="cluster: one UltraCluster placement group; partition for very large fleets."
    )
    partitions: Optional[int] = Field(None, ge=1, le=7, description="Partition count (partition strategy only).")
    existing_group: Optional[str] = Field(
        None, pattern=PLACEMENT_GROUP_NAME_PATTERN,
        description="Launch into this placement group of yours (e.g. the one an ODCR was made in) instead of one "
        "fmcluster creates.",
    )

    @model_validator(mode="after")
    def _partitions(self) -> Placement:
        if self.partitions is not None and self.strategy != "partition":
            raise_problems([("partitions", "applies to strategy partition only")])
        if self.existing_group is not None and ("strategy" in self.model_fields_set or self.partitions is not None):
            raise_problems([("existing_group", "the group's own strategy applies; give existing_group alone")])
        return self


class NodeGroup(SpecModel):
    name: str = Field(
        pattern=GROUP_NAME_PATTERN, description="2-32 lower-case letters, digits and hyphens, starting with a letter"
    )
    instance_type: str = Field(description="EC2 instance type (p5.48xlarge); HyperPod's ml. prefix is added for you.")
    count: int = Field(ge=1, le=MAX_GROUP_SIZE, description="Instances in the group: its fixed size, or with "
                       "min_count/max_count its desired size (the size deployed where the service keeps one).")
    min_count: Optional[int] = Field(
        None, ge=0, le=MAX_GROUP_SIZE,
        description="Elastic groups: the fewest instances the group may shrink to (default count). docs/resilience.md",
    )
    max_count: Optional[int] = Field(
        None, ge=1, le=MAX_GROUP_SIZE,
        description="Elastic groups: the most instances the group may grow to (default count); quotas are checked "
        "for it. docs/resilience.md",
    )
    role: Literal["gpu", "cpu"] = Field("gpu", description="gpu groups must use a GPU instance type.")
    capacity: Capacity = Field(default_factory=Capacity)
    efa: Optional[bool] = Field(None, description="Attach EFA; default on when the instance type supports it.")
    placement: Optional[Placement] = Field(
        None, description="Default: cluster placement group for EFA groups, none with a Capacity Block."
    )
    image_family: str = Field(
        images.DEFAULT_FAMILY,
        description=f"The AMI's family ({', '.join(images.FAMILIES)}): decides the root device and, without ami_id, "
        "the public SSM parameter of the image. Required with ami_id.",
    )
    ami_id: Optional[str] = Field(
        None, pattern=AMI_PATTERN, description="AMI override, ami- and 8 or 17 hex digits (default: the family's image)"
    )
    root_volume_gib: int = Field(200, ge=100, le=16384, description="Encrypted gp3 root volume.")

    @field_validator("instance_type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        v = ec2_type(v)
        if v not in catalog.all_types():
            raise ValueError(
                f"unknown instance type {v!r}; allowed: GPU {', '.join(catalog.gpu_types())}; "
                f"CPU {', '.join(catalog.cpu_types())}"
            )
        return v

    @field_validator("image_family")
    @classmethod
    def _family(cls, v: str) -> str:
        if v not in images.FAMILIES:
            raise ValueError(f"{v!r} is not an image family; allowed: {', '.join(images.FAMILIES)}")
        return v

    def image_problems(self) -> List[Tuple[str, str]]:
        """For orchestrators that boot the group from fmcluster's launch templates: the family must be declared with
        an ami_id (it decides the root device), and must publish an image for the type's architecture without one."""
        if self.ami_id and "image_family" not in self.model_fields_set:
            return [("image_family", "required with ami_id: the family decides the root device the launch template "
                     f"sizes (/dev/sda1 on Ubuntu, /dev/xvda on Amazon Linux); one of {', '.join(images.FAMILIES)}")]
        if not self.ami_id and self.image.default_parameter(self.instance.architecture) is None:
            return [("image_family", f"{self.image_family} publishes no {self.instance.architecture} image; give ami_id")]
        return []

    @property
    def image(self) -> images.ImageFamily:
        return images.family(self.image_family)

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.get(self.instance_type)

    @property
    def efa_enabled(self) -> bool:
        return self.instance.efa_supported if self.efa is None else self.efa

    @property
    def placement_strategy(self) -> str:
        """The placement group fmcluster creates for the group: cluster, partition, or none. None for a Capacity
        Block (AWS places it), an ODCR (open, or made in a placement group of its own: see existing_placement_group),
        a group launched into an existing group, and groups without EFA."""
        if self.placement is not None:
            return "none" if self.placement.existing_group else self.placement.strategy
        if self.capacity.type in ("capacity-block", "odcr") or not self.efa_enabled:
            return "none"
        return "cluster"

    @property
    def existing_placement_group(self) -> Optional[str]:
        return self.placement.existing_group if self.placement is not None else None

    @property
    def min_size(self) -> int:
        """The fewest instances the group runs: min_count, or count for a static group."""
        return self.count if self.min_count is None else self.min_count

    @property
    def max_size(self) -> int:
        """The most instances the group runs (what quotas, addresses and reservations must hold): max_count or count."""
        return self.count if self.max_count is None else self.max_count

    @property
    def elastic(self) -> bool:
        """The group may change size by itself (a scaler or the scheduler starts and stops its nodes)."""
        return self.min_size != self.max_size

    @property
    def ip_addresses(self) -> int:
        return self.max_size * self.instance.ip_interfaces

    @model_validator(mode="after")
    def _consistent(self) -> NodeGroup:
        t = self.instance
        found = []
        if self.role == "gpu" and not t.is_gpu:
            found.append(("instance_type", f"role gpu needs a GPU instance type; {self.instance_type} has none "
                          f"(allowed: {', '.join(catalog.gpu_types())}; or set role: cpu)"))
        if self.efa and not t.efa_supported:
            found.append(("efa", f"{self.instance_type} has no EFA; set efa: false or use an EFA instance type"))
        if self.capacity.type == "capacity-block" and self.placement and (
                self.placement.strategy != "none" or self.placement.existing_group):
            found.append(("placement.strategy", "a Capacity Block cannot be combined with a placement group "
                          "(AWS places Capacity Block instances itself); use none or leave placement out"))
        if self.capacity.type == "odcr" and self.placement and not self.placement.existing_group \
                and self.placement.strategy != "none":
            found.append(("placement.strategy", "an On-Demand Capacity Reservation is either open (a new placement "
                          "group can only hurt the fit) or made in a placement group of its own: name that one with "
                          "placement.existing_group, or leave placement out"))
        if self.capacity.size is not None and self.max_size > self.capacity.size:
            at = "count" if self.max_count is None else "max_count"
            found.append((at, f"{self.max_size} exceeds capacity.size {self.capacity.size} of the reservation"))
        found += self._range_problems()
        raise_problems(found)
        return self

    def _range_problems(self) -> List[Tuple[str, str]]:
        found: List[Tuple[str, str]] = []
        if self.min_size > self.count:
            found.append(("min_count", f"{self.min_size} exceeds count {self.count}; the range is "
                          "min_count <= count <= max_count"))
        if self.max_size < self.count:
            found.append(("max_count", f"{self.max_size} is below count {self.count}; the range is "
                          "min_count <= count <= max_count"))
        if self.elastic and self.capacity.type == "capacity-block":
            # A Capacity Block is bought, and billed, for a fixed number of instances over its window; the group is
            # that block (EC2 user guide, "Capacity Blocks for ML").
            found.append(("max_count", "a Capacity Block group is sized to its block, which is paid for whole for "
                          "its window: leave min_count and max_count out and set count to the block's instance count "
                          "(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html)"))
        return found

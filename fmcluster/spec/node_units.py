"""Node groups as a kind declares them in a template: one `NodeUnit` per group of like instances.

What `fmcluster diff` compares between two syntheses. Each kind reads its own resources (`OrchestratorTraits.node_units`
over its ``nodes.resource_types``), so the diff tool names no kind; the type and the helpers live here, beside the
kinds' other traits, because both the kinds and the tools read them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Iterator, Optional

from fmcluster import catalog

Template = Dict[str, Any]
Resources = Dict[str, Dict[str, Any]]
CAPACITY_KEYS = ("CapacityReservationTarget", "CapacityReservationId", "CapacityReservationResourceGroupArn",
                 "TrainingPlanArn")


def size_of(value: Any) -> int:
    """A size from a template: a number, or 0 for anything else (a parameter, a malformed value)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


@dataclass
class NodeUnit:
    """One group of like instances: an EKS node group, a PCS compute node group, a HyperPod instance group,
    a ParallelCluster compute resource."""

    key: str  # stack/logical id[/group]
    stack: str
    logical_id: str
    service: str  # eks | pcs | hyperpod | parallelcluster
    instance_type: str
    count: int  # instances running now (desired, static minimum, instance count)
    launch_template: Optional[str] = None
    capacity: FrozenSet[str] = frozenset()
    config: Any = None  # what a change of which rolls the group (compared as a whole)
    force_update: bool = False
    capacity_block: bool = False
    update_config: Any = None  # EKS UpdateConfig (MaxUnavailable, UpdateStrategy)
    queue_update_strategy: str = ""
    lifecycle: Any = None  # HyperPod lifecycle scripts: a change reaches only new instances
    scaling: Any = None  # the sizes CloudFormation sends when they change (EKS ScalingConfig, PCS ScalingConfiguration)
    min_size: int = 0
    max_size: int = 0  # the most instances that can be running (an autoscaler or Slurm moves within min..max)
    autoscaled: bool = False  # a HyperPod instance group HyperPod's Karpenter scales (InstanceCount 0, AutoScaling on)

    @property
    def gpus(self) -> int:
        try:
            return catalog.get(self.instance_type).gpus * self.count
        except KeyError:
            return 0

    def describe(self, count: Optional[int] = None) -> str:
        n = self.count if count is None else count
        per = self.gpus // self.count if self.count else 0
        return f"{n} x {self.instance_type} ({n * per} GPUs)"


def walk_capacity(value: Any) -> Iterator[str]:
    """Every capacity reservation or training plan a part of a template names, as JSON."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in CAPACITY_KEYS:
                yield json.dumps(v, sort_keys=True)
            else:
                yield from walk_capacity(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk_capacity(v)


def ref(value: Any) -> Optional[str]:
    """The logical id a ``{"Ref": id}`` names."""
    return value.get("Ref") if isinstance(value, dict) and isinstance(value.get("Ref"), str) else None


def launch_template_data(resources: Resources, logical_id: Optional[str]) -> Dict[str, Any]:
    """The LaunchTemplateData of the launch template `logical_id` in `resources` (empty when there is none)."""
    return dict(resources.get(logical_id or "", {}).get("Properties", {}).get("LaunchTemplateData", {}))

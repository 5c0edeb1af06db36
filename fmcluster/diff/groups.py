"""Node groups as each orchestrator declares them in a template: one `NodeUnit` per group of like instances."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Iterator, Optional

from fmcluster import catalog

Template = Dict[str, Any]


def size_of(value: Any) -> int:
    """A size from a template: a number, or 0 for anything else (a parameter, a malformed value)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


NODE_TYPES = ("AWS::EKS::Nodegroup", "AWS::PCS::ComputeNodeGroup", "AWS::SageMaker::Cluster", "Custom::PclusterCluster")
_CAPACITY_KEYS = ("CapacityReservationTarget", "CapacityReservationId", "CapacityReservationResourceGroupArn",
                  "TrainingPlanArn")


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


def _walk_capacity(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in _CAPACITY_KEYS:
                yield json.dumps(v, sort_keys=True)
            else:
                yield from _walk_capacity(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk_capacity(v)


def _ref(value: Any) -> Optional[str]:
    return value.get("Ref") if isinstance(value, dict) and isinstance(value.get("Ref"), str) else None


def units(stack: str, template: Optional[Template]) -> Dict[str, NodeUnit]:
    """Every node group a stack template declares, by key."""
    resources = (template or {}).get("Resources", {})
    out: Dict[str, NodeUnit] = {}

    def lt_data(lid: Optional[str]) -> Dict[str, Any]:
        return dict(resources.get(lid or "", {}).get("Properties", {}).get("LaunchTemplateData", {}))

    for lid, r in resources.items():
        p, t = r.get("Properties", {}), r.get("Type")
        if t == "AWS::EKS::Nodegroup":
            lt = _ref((p.get("LaunchTemplate") or {}).get("Id"))
            data = lt_data(lt)
            itype = (p.get("InstanceTypes") or [data.get("InstanceType", "")])[0]
            config = {k: v for k, v in p.items() if k not in ("ScalingConfig", "Labels", "Taints", "Tags", "UpdateConfig")}
            sizes = p.get("ScalingConfig") or {}
            block = p.get("CapacityType") == "CAPACITY_BLOCK"
            desired, low, high = (size_of(sizes.get(k)) for k in ("DesiredSize", "MinSize", "MaxSize"))
            # A Capacity Block group holds what the block holds once it is active (MaxSize: the spec's count), however
            # the template's desired size was set when it was created (an earlier release created it at 0).
            out[f"{stack}/{lid}"] = NodeUnit(
                f"{stack}/{lid}", stack, lid, "eks", itype, max(desired, high) if block else desired,
                lt, frozenset(_walk_capacity(data)), config, bool(p.get("ForceUpdateEnabled")),
                block, update_config=p.get("UpdateConfig") or {}, scaling=sizes, min_size=low,
                max_size=max(high, desired))
        elif t == "AWS::PCS::ComputeNodeGroup":
            lt = _ref((p.get("CustomLaunchTemplate") or {}).get("TemplateId"))
            itype = ((p.get("InstanceConfigs") or [{}])[0]).get("InstanceType", "")
            config = {k: v for k, v in p.items() if k not in ("ScalingConfiguration", "Tags")}
            sizes = p.get("ScalingConfiguration") or {}
            low, high = size_of(sizes.get("MinInstanceCount")), size_of(sizes.get("MaxInstanceCount"))
            out[f"{stack}/{lid}"] = NodeUnit(
                f"{stack}/{lid}", stack, lid, "pcs", itype, low, lt, frozenset(_walk_capacity(lt_data(lt))), config,
                scaling=sizes, min_size=low, max_size=max(low, high))
        elif t == "AWS::SageMaker::Cluster":
            karpenter = (p.get("AutoScaling") or {}).get("Mode") == "Enable"
            for g in p.get("InstanceGroups", []):
                name = g.get("InstanceGroupName", "")
                config = {k: v for k, v in g.items() if k not in ("InstanceCount", "LifeCycleConfig")}
                count = size_of(g.get("InstanceCount"))
                out[f"{stack}/{lid}/{name}"] = NodeUnit(
                    f"{stack}/{lid}/{name}", stack, lid, "hyperpod", g.get("InstanceType", ""),
                    count, None, frozenset(_walk_capacity(g)), config,
                    lifecycle=g.get("LifeCycleConfig"), autoscaled=karpenter and count == 0)
        elif t == "Custom::PclusterCluster":
            scheduling = (p.get("ClusterConfiguration") or {}).get("Scheduling") or {}
            strategy = str((scheduling.get("SlurmSettings") or {}).get("QueueUpdateStrategy", "COMPUTE_FLEET_STOP"))
            for q in scheduling.get("SlurmQueues", []):
                for cr in q.get("ComputeResources", []):
                    itype = cr.get("InstanceType") or ((cr.get("Instances") or [{}])[0]).get("InstanceType", "")
                    key = f"{stack}/{lid}/{q.get('Name')}/{cr.get('Name')}"
                    queue = {k: v for k, v in q.items() if k != "ComputeResources"}
                    config = {"queue": queue, "resource": {k: v for k, v in cr.items() if k not in ("MinCount", "MaxCount")}}
                    low, high = size_of(cr.get("MinCount")), size_of(cr.get("MaxCount"))
                    out[key] = NodeUnit(key, stack, lid, "parallelcluster", itype, low, None,
                                        frozenset(_walk_capacity(cr)) | frozenset(_walk_capacity(queue)), config,
                                        queue_update_strategy=strategy, min_size=low, max_size=max(low, high))
    return out

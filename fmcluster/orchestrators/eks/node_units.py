"""The eks kind's node groups in a template, for `fmcluster diff`: one unit per EKS managed node group."""

from __future__ import annotations

from typing import Any, Dict, List

from fmcluster.spec.node_units import NodeUnit, Resources, launch_template_data, ref, size_of, walk_capacity


def node_units(stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
    p = resource.get("Properties", {})
    lt = ref((p.get("LaunchTemplate") or {}).get("Id"))
    data = launch_template_data(resources, lt)
    itype = (p.get("InstanceTypes") or [data.get("InstanceType", "")])[0]
    config = {k: v for k, v in p.items() if k not in ("ScalingConfig", "Labels", "Taints", "Tags", "UpdateConfig")}
    sizes = p.get("ScalingConfig") or {}
    block = p.get("CapacityType") == "CAPACITY_BLOCK"
    desired, low, high = (size_of(sizes.get(k)) for k in ("DesiredSize", "MinSize", "MaxSize"))
    # A Capacity Block group holds what the block holds once it is active (MaxSize: the spec's count), however the
    # template's desired size was set when it was created (an earlier release created it at 0).
    return [NodeUnit(
        f"{stack}/{logical_id}", stack, logical_id, "eks", itype, max(desired, high) if block else desired,
        lt, frozenset(walk_capacity(data)), config, bool(p.get("ForceUpdateEnabled")),
        block, update_config=p.get("UpdateConfig") or {}, scaling=sizes, min_size=low,
        max_size=max(high, desired))]

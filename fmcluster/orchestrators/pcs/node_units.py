"""The pcs kind's node groups in a template, for `fmcluster diff`: one unit per PCS compute node group."""

from __future__ import annotations

from typing import Any, Dict, List

from fmcluster.spec.node_units import NodeUnit, Resources, launch_template_data, ref, size_of, walk_capacity


def node_units(stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
    p = resource.get("Properties", {})
    lt = ref((p.get("CustomLaunchTemplate") or {}).get("TemplateId"))
    itype = ((p.get("InstanceConfigs") or [{}])[0]).get("InstanceType", "")
    config = {k: v for k, v in p.items() if k not in ("ScalingConfiguration", "Tags")}
    sizes = p.get("ScalingConfiguration") or {}
    low, high = size_of(sizes.get("MinInstanceCount")), size_of(sizes.get("MaxInstanceCount"))
    return [NodeUnit(
        f"{stack}/{logical_id}", stack, logical_id, "pcs", itype, low, lt,
        frozenset(walk_capacity(launch_template_data(resources, lt))), config,
        scaling=sizes, min_size=low, max_size=max(low, high))]

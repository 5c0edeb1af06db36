"""A HyperPod cluster's instance groups in a template, for `fmcluster diff` (both HyperPod kinds): one unit per
instance group of the AWS::SageMaker::Cluster."""

from __future__ import annotations

from typing import Any, Dict, List

from fmcluster.spec.node_units import NodeUnit, Resources, size_of, walk_capacity


def node_units(stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
    p = resource.get("Properties", {})
    karpenter = (p.get("AutoScaling") or {}).get("Mode") == "Enable"
    found = []
    for g in p.get("InstanceGroups", []):
        name = g.get("InstanceGroupName", "")
        config = {k: v for k, v in g.items() if k not in ("InstanceCount", "LifeCycleConfig")}
        count = size_of(g.get("InstanceCount"))
        found.append(NodeUnit(
            f"{stack}/{logical_id}/{name}", stack, logical_id, "hyperpod", g.get("InstanceType", ""),
            count, None, frozenset(walk_capacity(g)), config,
            lifecycle=g.get("LifeCycleConfig"), autoscaled=karpenter and count == 0))
    return found

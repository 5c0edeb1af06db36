"""The parallelcluster kind's node groups in a template, for `fmcluster diff`: one unit per compute resource of each
Slurm queue in the cluster's configuration (Custom::PclusterCluster)."""

from __future__ import annotations

from typing import Any, Dict, List

from fmcluster.spec.node_units import NodeUnit, Resources, size_of, walk_capacity


def node_units(stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
    p = resource.get("Properties", {})
    scheduling = (p.get("ClusterConfiguration") or {}).get("Scheduling") or {}
    strategy = str((scheduling.get("SlurmSettings") or {}).get("QueueUpdateStrategy", "COMPUTE_FLEET_STOP"))
    found = []
    for q in scheduling.get("SlurmQueues", []):
        for cr in q.get("ComputeResources", []):
            itype = cr.get("InstanceType") or ((cr.get("Instances") or [{}])[0]).get("InstanceType", "")
            key = f"{stack}/{logical_id}/{q.get('Name')}/{cr.get('Name')}"
            queue = {k: v for k, v in q.items() if k != "ComputeResources"}
            config = {"queue": queue, "resource": {k: v for k, v in cr.items() if k not in ("MinCount", "MaxCount")}}
            low, high = size_of(cr.get("MinCount")), size_of(cr.get("MaxCount"))
            found.append(NodeUnit(key, stack, logical_id, "parallelcluster", itype, low, None,
                                  frozenset(walk_capacity(cr)) | frozenset(walk_capacity(queue)), config,
                                  queue_update_strategy=strategy, min_size=low, max_size=max(low, high)))
    return found

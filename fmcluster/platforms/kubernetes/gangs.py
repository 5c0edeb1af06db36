"""The alternatives to Kueue (orchestrator.eks.scheduler): Volcano and NVIDIA KAI Scheduler, each a second scheduler
with gang scheduling and topology-aware placement over EC2's network-topology node labels, installed from its
published chart at the pinned version (versions.CHARTS) with a training queue sized from the node groups.

- Volcano 1.15: PodGroups are gangs (minAvailable); the network-topology-aware plugin places a job's pods under
  HyperNodes, which the controller discovers from node labels (networkTopologyDiscovery, source label). Jobs use
  schedulerName volcano and a Queue. https://github.com/volcano-sh/volcano/blob/v1.15.1/docs/user-guide/
  how_to_use_network_topology_aware_scheduling.md , .../how_to_use_hypernode_auto_discovery.md
- KAI 0.17: every workload is a gang (its PodGroup), queues are hierarchical (a parent queue and ours), Topology
  objects name the label levels and workloads annotate kai.scheduler/topology{,-required,-preferred}-placement.
  https://github.com/kai-scheduler/KAI-Scheduler/tree/v0.17.0/docs/topology
"""

from __future__ import annotations

from typing import Any, Dict, List

import yaml

from fmcluster.platforms.kubernetes import labels
from fmcluster.spec import NodeGroup

QUEUE = "training"
VOLCANO_NAMESPACE, KAI_NAMESPACE = "volcano-system", "kai-scheduler"
# Volcano's scheduler configuration: the chart's default tiers plus network-topology-aware (with GPU bin packing)
VOLCANO_SCHEDULER_CONFIG = {
    "actions": "enqueue, allocate, backfill",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
        {"plugins": [{"name": "overcommit"}, {"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
                     {"name": "proportion"}, {"name": "nodeorder"}, {"name": "binpack"},
                     {"name": "network-topology-aware",
                      "arguments": {"weight": 10, "hypernode.binpack.resources": labels.GPU_RESOURCE,
                                    f"hypernode.binpack.resources.{labels.GPU_RESOURCE}": 2}}]},
    ],
}


def _depths(groups: List[NodeGroup]) -> Dict[str, List[str]]:
    """Topology name -> label levels (top to host), one per depth of EC2's topology among the groups."""
    found: Dict[str, List[str]] = {}
    for g in groups:
        levels = labels.topology_levels(g.instance_type)
        if levels:
            found[f"aws-{len(levels) - 1}-layers"] = levels
    return dict(sorted(found.items()))


def _totals(groups: List[NodeGroup]) -> Dict[str, float]:
    """The groups' capacity at their ceilings (max_count): a gang the queue does not admit leaves no pending pods for
    Cluster Autoscaler to scale an elastic group up for."""
    return {"cpu": sum(g.instance.vcpus * g.max_size for g in groups),
            "memory_mib": sum(g.instance.memory_mib * g.max_size for g in groups),
            "gpu": sum((g.instance.gpus or 0) * g.max_size for g in groups),
            "efa": sum((g.instance.efa_interfaces if g.efa_enabled else 0) * g.max_size for g in groups)}


# ---- Volcano ---------------------------------------------------------------------------------------------------

def volcano_values(groups: List[NodeGroup], *, system_selector: Dict[str, str]) -> Dict[str, Any]:
    """Helm values of the volcano chart: controllers and scheduler on the system nodes, HyperNodes discovered from the
    EC2 topology labels (one network topology type per depth; Volcano makes the label above the host tier 1)."""
    discovery = {"networkTopologyDiscovery": [{
        "source": "label", "enabled": True, "interval": "10m",
        "config": {"networkTopologyTypes": {name.replace("-", "")[:20]: [{"nodeLabel": level} for level in levels]
                                            for name, levels in _depths(groups).items()}}}]}
    return {"custom": {
        "default_ns": dict(system_selector),
        "scheduler_config_override": yaml.safe_dump(VOLCANO_SCHEDULER_CONFIG, sort_keys=False),
        "controller_config_override": yaml.safe_dump(discovery, sort_keys=False),
    }}


def volcano_objects(groups: List[NodeGroup]) -> List[Dict[str, Any]]:
    """The training Queue, capped at the node groups' capacity."""
    t = _totals(groups)
    capability: Dict[str, Any] = {"cpu": str(t["cpu"]), "memory": f"{t['memory_mib']}Mi",
                                  labels.GPU_RESOURCE: str(t["gpu"])}
    if t["efa"]:
        capability[labels.EFA_RESOURCE] = str(t["efa"])
    return [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": QUEUE},
             "spec": {"weight": 1, "reclaimable": False, "capability": capability}}]


# ---- KAI -------------------------------------------------------------------------------------------------------

def kai_values(*, system_selector: Dict[str, str]) -> Dict[str, Any]:
    """Helm values of the kai-scheduler chart: its services on the system nodes (images as the published chart sets)."""
    return {"global": {"nodeSelector": dict(system_selector)}}


def kai_objects(groups: List[NodeGroup]) -> List[Dict[str, Any]]:
    """Topologies per depth, a parent queue and the training queue (quota: the groups' capacity; KAI counts CPU in
    millicpus, memory in MB of 10^6 bytes, GPUs in devices)."""
    t = _totals(groups)
    unlimited = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
    objects: List[Dict[str, Any]] = [
        {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": name},
         "spec": {"levels": [{"nodeLabel": level} for level in levels]}} for name, levels in _depths(groups).items()]
    objects.append({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": f"{QUEUE}-parent"},
                    "spec": {"resources": {"cpu": dict(unlimited), "gpu": dict(unlimited),
                                           "memory": dict(unlimited)}}})
    objects.append({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": QUEUE},
                    "spec": {"parentQueue": f"{QUEUE}-parent", "resources": {
                        "cpu": {"quota": t["cpu"] * 1000, "limit": -1, "overQuotaWeight": 1},
                        "gpu": {"quota": t["gpu"], "limit": -1, "overQuotaWeight": 1},
                        "memory": {"quota": t["memory_mib"] * 1048576 // 1000000, "limit": -1,
                                   "overQuotaWeight": 1}}}})
    return objects

"""Node labels and taints of EKS node groups, said once: the node groups set them, the device plugins, Kueue flavors,
the node gate and the example jobs select on them."""

from __future__ import annotations

from typing import Dict, List

from fmcluster.runtime.actions import TAINT_KEY
from fmcluster.spec import NodeGroup

GROUP = "fmcluster.io/node-group"
INSTANCE_TYPE = "fmcluster.io/instance-type"
EFA_INTERFACES = "fmcluster.io/efa-interfaces"
# plugin | dra | none: which EFA component serves the node, so the device plugin and the DRA driver never share one
EFA_DEVICE = "fmcluster.io/efa-device"
# the NVIDIA device plugin chart's default node affinity accepts this label (without NFD/GFD labels)
GPU_PRESENT = "nvidia.com/gpu.present"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"

# Only GPU workloads land on GPU nodes: they tolerate this taint (Kueue adds it from the flavor).
GPU_TAINT: Dict[str, str] = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
# Every GPU node registers with this taint; the node gate removes it when the boot validator passed, or sets the
# value to "failed" (the runtime's taint key, fmcluster.runtime.actions.TAINT_KEY).
VALIDATION_TAINT_KEY = TAINT_KEY
PENDING, FAILED = "pending", "failed"
VALIDATION_TAINT: Dict[str, str] = {"key": VALIDATION_TAINT_KEY, "value": PENDING, "effect": "NoSchedule"}


def efa_device_of(group: NodeGroup, efa_device: str) -> str:
    return efa_device if group.efa_enabled else "none"


def node_labels(group: NodeGroup, *, efa_device: str) -> Dict[str, str]:
    found = {
        GROUP: group.name,
        INSTANCE_TYPE: group.instance_type,
        EFA_INTERFACES: str(group.instance.efa_interfaces if group.efa_enabled else 0),
        EFA_DEVICE: efa_device_of(group, efa_device),
    }
    if group.instance.is_gpu:
        found[GPU_PRESENT] = "true"
    return found


def node_taints(group: NodeGroup) -> List[Dict[str, str]]:
    """Every spec node group registers with the validation gate's taint; GPU groups also with the GPU taint."""
    return ([dict(GPU_TAINT)] if group.instance.is_gpu else []) + [dict(VALIDATION_TAINT)]


def tolerate(*taints: Dict[str, str]) -> List[Dict[str, str]]:
    """Tolerations of the given taints, whatever their value."""
    return [{"key": t["key"], "operator": "Exists", "effect": t["effect"]} for t in taints]

# EC2 instance topology as node labels: EKS labels nodes of the supported types with the network nodes above them,
# topology.k8s.aws/network-node-layer-1 (top) to -3, or -4 on types whose topology has four layers (EKS user guide,
# "ML workload topology"; EC2 user guide, "Instance topology: prerequisites" lists the types and their layers).
# https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html
NETWORK_LAYER = "topology.k8s.aws/network-node-layer-{}"
HOSTNAME = "kubernetes.io/hostname"
TOPOLOGY_LAYERS: Dict[str, int] = {
    "p5.48xlarge": 3, "p5e.48xlarge": 3, "p5en.48xlarge": 3, "p6e-gb200.36xlarge": 3,
    "p6-b200.48xlarge": 4, "p6-b300.48xlarge": 4,
}


def topology_levels(instance_type: str) -> List[str]:
    """Node labels from the top network layer down to the host, or [] for types without instance topology."""
    layers = TOPOLOGY_LAYERS.get(instance_type, 0)
    if not layers:
        return []
    return [NETWORK_LAYER.format(i) for i in range(1, layers + 1)] + [HOSTNAME]

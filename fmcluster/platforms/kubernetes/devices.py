"""Helm values of the device plugins: the NVIDIA device plugin on GPU nodes, and on EFA nodes either the EFA device
plugin or the EFA DRA driver (the spec's orchestrator.eks.efa_device), never both on one node: each selects the
fmcluster.io/efa-device label value of its own (EKS user guide, "Manage EFA devices": running both on a node
oversubscribes the devices). https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html

Every plugin tolerates the GPU taint and the validation gate's, so devices are advertised before the gate opens.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from fmcluster.platforms.kubernetes import labels
from fmcluster.spec import NodeGroup

CRITICAL_ADDONS = {"key": "CriticalAddonsOnly", "operator": "Exists"}


def node_tolerations() -> List[Dict[str, str]]:
    """What every per-node agent of ours tolerates: the GPU taint and the validation gate's, whatever the value."""
    return [dict(CRITICAL_ADDONS)] + labels.tolerate(labels.GPU_TAINT, labels.VALIDATION_TAINT)


def nvidia_device_plugin() -> Dict[str, Any]:
    """nvidia-device-plugin: MOFED off (with it, uverbs devices are mounted into every GPU pod and clash with EFA;
    NVIDIA/k8s-device-plugin #1692), no GFD/NFD: the chart's default node affinity accepts nvidia.com/gpu.present,
    which the GPU node groups set."""
    return {
        "mofedEnabled": False,
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
        "tolerations": node_tolerations(),
        "priorityClassName": "system-node-critical",
    }


def efa_device_plugin() -> Dict[str, Any]:
    """aws-efa-k8s-device-plugin (resource vpc.amazonaws.com/efa) on nodes labelled for the plugin only."""
    return {"nodeSelector": {labels.EFA_DEVICE: "plugin"}, "tolerations": node_tolerations()}


def efa_dra_driver() -> Dict[str, Any]:
    """aws-dranet (DeviceClass efa.networking.k8s.aws) on nodes labelled for DRA only."""
    return {"nodeSelector": {labels.EFA_DEVICE: "dra"}, "tolerations": node_tolerations()}


EFA_DEVICE_CLASS = "efa.networking.k8s.aws"  # the aws-dranet chart's DeviceClass (deviceClass.name)


def efa_claim_template_name(group: NodeGroup) -> str:
    """The ResourceClaimTemplate a pod on `group`'s nodes claims its EFA devices with (efa_device: dra)."""
    return f"efa-{group.name}"


def efa_claim_template(group: NodeGroup, namespace: str) -> Dict[str, Any]:
    """With the DRA driver, what a pod claims instead of vpc.amazonaws.com/efa: all `efa_interfaces` EFA devices of
    a node of `group` (allocationMode ExactCount, count = the type's EFA interfaces, one EFA PCI device each, which
    the DeviceClass selects), as a ResourceClaimTemplate in the training namespace (resource.k8s.io/v1, Kubernetes
    >= 1.34). A pod lists it under spec.resourceClaims and each container under resources.claims.

    ExactCount, not All: Kueue (the default scheduler) charges a claim's ``count`` to the quota resource its
    DeviceClass is mapped to and marks a workload whose claim uses allocationMode All inadmissible ("AllocationMode
    'All' is not supported", kueue v0.19.2 pkg/dra/claims.go countDevicesPerClass)."""
    if not group.efa_enabled:
        raise ValueError(f"group {group.name}: no EFA devices to claim")
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": efa_claim_template_name(group), "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "efa", "exactly": {"deviceClassName": EFA_DEVICE_CLASS, "allocationMode": "ExactCount",
                                        "count": group.instance.efa_interfaces}}]}}},
    }


def efa_claim_templates(groups: Sequence[NodeGroup], namespace: str) -> List[Dict[str, Any]]:
    """One claim template per EFA-enabled node group."""
    return [efa_claim_template(g, namespace) for g in groups if g.efa_enabled]

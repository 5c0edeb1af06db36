"""What a HyperPod on EKS GPU node's allocatable CPU already holds before a training pod that takes the node arrives:
each DaemonSet that runs there and the CPU it requests, with where the figure comes from, and an allowance for what
no source publishes. The first job's worker asks for the node's logical CPUs less the kubelet's reserve less this sum
(platforms/kubernetes/allocatable.whole_node_cpu_request); docs/hyperpod-eks.md, "The first job", has the table.

A pod without a CPU request takes none of the node's allocatable CPU for scheduling (Kubernetes, "Resource Management
for Pods and Containers"), so a chart that sets no request counts 0. The EKS add-ons are installed by EKS from
manifests it does not publish: their open-source charts' defaults are what is counted (not published = marked so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

from fmcluster.orchestrators.hyperpod_eks import nodes
from fmcluster.orchestrators.hyperpod_eks.versions import HYPERPOD_CHART, S3_CSI
from fmcluster.platforms.kubernetes import gate, metrics
from fmcluster.platforms.storage import installed_csi_addons
from fmcluster.spec import ClusterSpec

CHART = f"https://github.com/aws/sagemaker-hyperpod-cli/tree/{HYPERPOD_CHART.commit}/helm_chart/HyperPodHelmChart"
# What no source gives: the HyperPod EKS AMI's kubelet reserve beyond nodeadm's ladder (HyperPod publishes neither its
# kubelet configuration nor that it uses nodeadm's), and agents HyperPod may run on its nodes outside its chart.
UNPUBLISHED_ALLOWANCE_MILLICORES = 1000


@dataclass(frozen=True)
class Request:
    """One DaemonSet on the node: its CPU request (millicores), where that comes from, and whether that source is the
    manifest that actually runs (False: an upstream chart's default for an add-on EKS installs, or an allowance)."""

    daemonset: str
    millicores: int
    source: str
    exact: bool


def cpu_millicores(objects: Sequence[Dict[str, Any]]) -> int:
    """The CPU the DaemonSets among `objects` request on each node they run on (containers, not init containers)."""
    total = 0
    for o in objects:
        if o.get("kind") != "DaemonSet":
            continue
        for c in o["spec"]["template"]["spec"].get("containers", []):
            cpu = str(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
            total += int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)
    return total


def ours(spec: ClusterSpec, group_instance_type: str) -> List[Request]:
    """fmcluster's own DaemonSets on a GPU node of the spec: the exporters (with observability) and the node gate."""
    found: List[Request] = []
    if spec.observability.enabled:
        found.append(Request("node-exporter, dcgm-exporter (fmcluster)", cpu_millicores(
            [metrics.node_exporter(), *metrics.dcgm_exporter([group_instance_type])]),
            "fmcluster/platforms/kubernetes/metrics.py", True))
    if nodes.gated(spec):
        found.append(Request("node gate (fmcluster)", cpu_millicores(
            [gate.daemonset(groups=[g.name for g in spec.node_groups], policy=spec.validation_policy)]),
            "fmcluster/platforms/kubernetes/gate.py", True))
    return found


def csi_node_plugins(spec: ClusterSpec) -> List[Request]:
    """The node plugin of every store's CSI driver the cluster installs (`CsiAddon`, read off the registered stores):
    one installed on every cluster, one a configured store mounts, and the Mountpoint for S3 driver serving installs
    for weights streamed from S3 (construct.py installs that one add-on for both)."""
    addons = {a.name: a for a in installed_csi_addons(spec)}
    if spec.serving is not None and any(d.source.s3 for d in spec.serving.models):
        addons.update((s.csi_addon.name, s.csi_addon) for s in spec.stores
                      if s.csi_addon is not None and s.csi_addon.name == S3_CSI)
    return [Request(f"{a.name} node plugin (add-on)", a.node_millicores, a.node_source, False) for a in addons.values()]


def gpu_node_requests(spec: ClusterSpec, group_instance_type: str) -> List[Request]:
    """Every DaemonSet on a GPU node with EFA, and the allowance for what is unpublished."""
    found = [
        Request("health-monitoring-agent (HyperPod's chart)", 500,
                f"{CHART}/charts/health-monitoring-agent/templates/health-monitoring-agent.yaml", True),
        Request("nvidia-device-plugin 0.16.1 (HyperPod's chart, values not overridden)", 0,
                "https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/helm/nvidia-device-plugin/values.yaml"
                " (resources: {}; read at main, not at 0.16.1)", False),
        Request("aws-efa-k8s-device-plugin 0.5.20 (HyperPod's chart, values not overridden)", 10,
                "https://github.com/aws/eks-charts/blob/master/stable/aws-efa-k8s-device-plugin/values.yaml "
                "(read at a later chart version)", False),
        Request("aws-node (vpc-cni add-on): aws-node and the network policy agent", 50,
                "https://github.com/aws/amazon-vpc-cni-k8s/blob/master/charts/aws-vpc-cni/values.yaml (aws-node "
                "25m; the agent's 25m assumed alike)", False),
        Request("kube-proxy (add-on)", 100, "EKS's kube-proxy DaemonSet (manifest not published)", False),
        Request("eks-pod-identity-agent (add-on)", 0,
                "https://github.com/aws/eks-pod-identity-agent/blob/main/charts/eks-pod-identity-agent/values.yaml "
                "(resources: {})", False),
        *csi_node_plugins(spec),
        *ours(spec, group_instance_type),
    ]
    if spec.checkpoints is not None and spec.checkpoints.tier == "managed":
        found.append(Request("HyperPod's memory management daemon (managed tiered checkpointing)", 500,
                             "not published: an allowance", False))
    found.append(Request("not published: the HyperPod AMI's kubelet reserve beyond nodeadm's, agents outside the "
                         "chart", UNPUBLISHED_ALLOWANCE_MILLICORES, "an allowance", False))
    return found


def reserved_millicores(spec: ClusterSpec, group_instance_type: str) -> int:
    """What the worker leaves to the node beside the kubelet's reserve (allocatable.whole_node_cpu_request)."""
    return sum(r.millicores for r in gpu_node_requests(spec, group_instance_type))

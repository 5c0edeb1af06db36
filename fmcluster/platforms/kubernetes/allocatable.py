"""What a GPU node offers pods: its allocatable resources, and the CPU a training pod that takes the whole node can
request.

Kubernetes schedules a pod only where the node's *allocatable* (capacity less kube-reserved, system-reserved and the
eviction threshold) covers the requests of the pod plus those already bound, DaemonSet pods included (Kubernetes
docs, "Reserve Compute Resources for System Daemons"). On the EKS AL2023 AMIs nodeadm reserves CPU by a per-core
ladder: 6% of the first core, 1% of the second, 0.5% of the third and fourth, 0.25% of every core after
(amazon-eks-ami, nodeadm `getCPUMillicoresToReserve`; the same table GKE documents). Kueue's topology-aware
scheduling places a pod set by its full PodSpec requests against that allocatable (kueue v0.19.2,
`tas_flavorassigner.go` podSetTopologyRequest), so a request the node cannot hold keeps the workload from being
admitted at all. Hugepages: AWS documents that instances with the EFA driver installed pre-allocate 5128 2 MiB huge
pages, which pods request as `hugepages-2Mi` (EKS user guide, "Run machine learning training on Amazon EKS with
Elastic Fabric Adapter"); both AMIs the Kubernetes kinds run install the EFA driver (the AL2023 NVIDIA AMI through
the EFA installer's --minimal install: amazon-eks-ami templates/al2023/provisioners/install-efa.sh). That the
--minimal install reserves them too is unverified (docs/eks.md, "Pod requests").
"""

from __future__ import annotations

from typing import Dict

from fmcluster.catalog import InstanceType

HUGEPAGES_2MI = "hugepages-2Mi"
EFA_HUGEPAGES_2MI = 5128 * 2 * 2**20  # bytes: 5128 pages of 2 MiB on a node with the EFA driver

# CPU left for the node's DaemonSet pods (VPC CNI, kube-proxy, Pod Identity agent, storage CSI node plugins, device
# plugins, node monitoring agent, the exporters): their requests add up to well under this, which also leaves a margin
# for one more agent of the operator's. An allowance, not a sum taken from the add-ons' manifests (unverified).
DAEMONSET_CPU_MILLICORES = 2000
# (cores in the step, millicores reserved per core), amazon-eks-ami nodeadm's ladder
_CPU_LADDER = ((1, 60), (1, 10), (2, 5))
_CPU_REST_PER_CORE = 2.5


def kube_reserved_cpu_millicores(vcpus: int) -> float:
    """CPU the EKS AMI keeps for the kubelet and the container runtime on a node with `vcpus` logical CPUs."""
    left, reserved = vcpus, 0.0
    for cores, per_core in _CPU_LADDER:
        step = min(left, cores)
        reserved += step * per_core
        left -= step
    return reserved + left * _CPU_REST_PER_CORE


def node_vcpus(instance: InstanceType, threads_per_core: int = 2) -> int:
    """Logical CPUs the node presents: all of them, or one per core with hyperthreading off (ThreadsPerCore 1)."""
    return instance.vcpus if threads_per_core == 2 else instance.vcpus // 2


def whole_node_cpu_request(instance: InstanceType, threads_per_core: int = 2,
                           daemonset_millicores: int = DAEMONSET_CPU_MILLICORES) -> int:
    """Whole cores a pod that takes the node can request: allocatable CPU less what the DaemonSets request
    (`daemonset_millicores`: a kind that has the sum from its DaemonSets' sources passes it; else the allowance)."""
    vcpus = node_vcpus(instance, threads_per_core)
    return int((vcpus * 1000 - kube_reserved_cpu_millicores(vcpus) - daemonset_millicores) // 1000)


def allocatable(instance: InstanceType, threads_per_core: int = 2) -> Dict[str, float]:
    """The node's allocatable for the resources a training pod asks for (cpu in cores; hugepages in bytes: the EFA
    driver's on EFA types, none elsewhere)."""
    vcpus = node_vcpus(instance, threads_per_core)
    return {
        "cpu": vcpus - kube_reserved_cpu_millicores(vcpus) / 1000,
        "nvidia.com/gpu": instance.gpus,
        "vpc.amazonaws.com/efa": instance.efa_interfaces,
        HUGEPAGES_2MI: EFA_HUGEPAGES_2MI if instance.efa_interfaces else 0,
        "hugepages-1Gi": 0,
    }

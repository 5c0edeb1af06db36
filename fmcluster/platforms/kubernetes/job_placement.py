"""Where a Kubernetes kind puts a training job's GPU pods, as the kind says it (`OrchestratorKind.job_placement`),
and the pod template such a pod gets: every GPU and EFA interface of its node, the hugepages EFA jobs request, the
shared file system's claim at its mount point, shared memory in RAM. The post-training jobs (`fmcluster job rl`,
`fmcluster job sft`) are written from it; the fabric job predates it and says the same in its own module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from fmcluster.platforms.kubernetes import devices, fabric_job, labels
from fmcluster.spec.node_group import NodeGroup

SHM = "64Gi"  # /dev/shm for NCCL and the rollout engine's inter-process buffers, in RAM


@dataclass(frozen=True)
class JobPlacement:
    """A kind's answer for one GPU node group.

    :param namespace: where the job's objects go.
    :param labels: the job's queue labels (Kueue's queue name, a priority class).
    :param nodes: GPU nodes the job may take (all of the group's, or a team's quota of them).
    :param node_selector: what every GPU pod selects besides the group (HyperPod's schedulable nodes).
    :param annotations: the GPU pods' template annotations (Kueue topology requests).
    :param efa_claim: EFA through the DRA driver's claim template rather than the device plugin's resource.
    :param hugepages: request the 2 MiB hugepages EFA jobs ask for (where the kind's queue covers or excludes them).
    :param threads_per_core: 1 where hyperthreading is off (fewer CPUs to request).
    :param daemonset_millicores: what the node's DaemonSets request, where the kind has the sum.
    :param service_account: the pods' service account (the eks kind's workload identity), or None.
    :param claim: the shared store's PersistentVolumeClaim in `namespace` (its Kubernetes volume's claim; the caller
        names it, as the kinds never name a store).
    :param notes: header lines the kind adds (what is unverified, what to look at when a pod stays pending).
    """

    namespace: str
    labels: Mapping[str, str]
    nodes: int
    node_selector: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    efa_claim: bool = False
    hugepages: bool = True
    threads_per_core: int = 2
    daemonset_millicores: Optional[int] = None
    service_account: Optional[str] = None
    claim: str = ""
    notes: Tuple[str, ...] = ()


def gpu_pod(group: NodeGroup, placement: JobPlacement, *, container: Dict[str, Any], mount_point: str,
            reserve_cpu_cores: int = 0, group_label: str = "fmcluster.io/node-group") -> Dict[str, Any]:
    """A pod template taking one whole GPU node of `group`, `container` given its resources, the shared file system and
    /dev/shm. `reserve_cpu_cores`: cores the container leaves for others in the pod (a sidecar)."""
    if not placement.claim:
        raise ValueError("placement.claim: the shared store's claim is not set")
    resources = fabric_job.worker_resources(group, threads_per_core=placement.threads_per_core,
                                            efa_claim=placement.efa_claim, hugepages=placement.hugepages,
                                            daemonset_millicores=placement.daemonset_millicores)
    if reserve_cpu_cores:
        resources["requests"]["cpu"] = str(int(resources["requests"]["cpu"]) - reserve_cpu_cores)
    mounts: List[Dict[str, Any]] = [{"name": "shared", "mountPath": mount_point},
                                    {"name": "shm", "mountPath": "/dev/shm"}]  # noqa: S108 - in RAM
    pod: Dict[str, Any] = {
        "nodeSelector": {labels.GROUP: group.name, **dict(placement.node_selector)},
        "containers": [{**container, "resources": resources, "volumeMounts": mounts}],
        "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": placement.claim}},
                    {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM}}],
    }
    if placement.service_account:
        pod["serviceAccountName"] = placement.service_account
    if placement.efa_claim:
        pod["resourceClaims"] = [{"name": "efa", "resourceClaimTemplateName": devices.efa_claim_template_name(group)}]
    template: Dict[str, Any] = {"spec": pod}
    if placement.annotations:
        template["metadata"] = {"annotations": dict(placement.annotations)}
    return template

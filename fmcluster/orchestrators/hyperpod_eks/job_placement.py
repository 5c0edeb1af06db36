"""Where a HyperPod on EKS cluster's training jobs go: the namespace and queue of the team whose GPU quota on the group
holds the most nodes, its training priority class, on nodes HyperPod's health checks report schedulable
(docs/post-training.md; the fabric job's first_job.py chooses the same way)."""

from __future__ import annotations

from fmcluster.orchestrators.hyperpod_eks import node_requests
from fmcluster.orchestrators.hyperpod_eks.first_job import HEALTH_LABEL, SCHEDULABLE
from fmcluster.orchestrators.hyperpod_eks.settings import PRIORITY_CLASS_SUFFIX, HyperPodEksOrchestrator
from fmcluster.platforms.kubernetes import labels
from fmcluster.platforms.kubernetes.job_placement import JobPlacement
from fmcluster.spec.cluster import ClusterSpec
from fmcluster.spec.node_group import NodeGroup


def placement(spec: ClusterSpec, group: NodeGroup) -> JobPlacement:
    s = HyperPodEksOrchestrator.of(spec)
    gpus = group.instance.gpus
    quota = {t.name: t.gpus.get(group.name, 0) // gpus for t in s.task_governance.teams}
    team = max(s.task_governance.teams, key=lambda t: quota[t.name])
    nodes = min(group.count, quota[team.name])
    if nodes < 1:
        raise ValueError(f"orchestrator.task_governance.teams: no team's GPU quota on node group {group.name} holds a "
                         f"whole node ({gpus} GPUs)")
    priority = next((p for p in s.task_governance.priority_classes if p.name == "training"),
                    s.task_governance.priority_classes[0])
    return JobPlacement(
        namespace=team.namespace, nodes=nodes,
        labels={"kueue.x-k8s.io/queue-name": team.local_queue,
                "kueue.x-k8s.io/priority-class": f"{priority.name}{PRIORITY_CLASS_SUFFIX}"},
        node_selector={HEALTH_LABEL: SCHEDULABLE}, threads_per_core=s.hyperpod.threads_per_core,
        daemonset_millicores=node_requests.reserved_millicores(spec, group.instance_type),
        # no hugepages: whether task governance's Kueue covers or excludes them is undocumented, and a resource its
        # ClusterQueue does not cover keeps the workload pending (docs/hyperpod-eks.md, as for the fabric job)
        hugepages=False,
        notes=(f"Team {team.name}'s quota ({nodes} of the group's {group.count} nodes), priority {priority.name}; task "
               "governance accounts a Ray cluster's whole declared size from admission to deletion (SageMaker guide, "
               "\"Quota and scheduling behavior for Ray workloads\").",
               f"Unverified: that task governance's ClusterQueues cover {labels.EFA_RESOURCE} (docs/hyperpod-eks.md): "
               f"if the Workload stays pending naming it, see  kubectl -n {team.namespace} describe workload  and "
               "report it; without it NCCL falls back to TCP."))

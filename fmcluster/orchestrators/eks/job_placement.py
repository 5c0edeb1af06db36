"""Where an EKS cluster's training jobs go: the training namespace, Kueue's queue, the whole group, packed under the
fewest network nodes where Kueue places by topology, with the training service account's workload identity
(docs/post-training.md)."""

from __future__ import annotations

from fmcluster.orchestrators.eks.settings import EksOrchestrator
from fmcluster.platforms.kubernetes import kueue, labels
from fmcluster.platforms.kubernetes.job_placement import JobPlacement
from fmcluster.spec.cluster import ClusterSpec
from fmcluster.spec.node_group import NodeGroup

# construct.WORKLOAD_SERVICE_ACCOUNT (its Pod Identity role holds the data bucket), said here without importing CDK
WORKLOAD_SERVICE_ACCOUNT = "fmcluster-training"


def placement(spec: ClusterSpec, group: NodeGroup) -> JobPlacement:
    s = EksOrchestrator.of(spec).eks
    if s.scheduler != "kueue":
        raise ValueError(f"orchestrator.eks.scheduler {s.scheduler}: the generated jobs go through Kueue's queue; "
                         "with Volcano or KAI add the scheduler's queue label and schedulerName by hand")
    levels = labels.topology_levels(group.instance_type)
    annotations = {kueue.PREFERRED_TOPOLOGY: levels[-2]} if s.kueue.topology_aware and levels else {}
    return JobPlacement(namespace=s.training_namespace, labels={kueue.QUEUE_LABEL: kueue.QUEUE}, nodes=group.count,
                        annotations=annotations, efa_claim=s.efa_device == "dra" and group.efa_enabled,
                        service_account=WORKLOAD_SERVICE_ACCOUNT)

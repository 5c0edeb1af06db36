"""`fmcluster status` for SageMaker HyperPod: the cluster, its instance groups and their nodes."""

from __future__ import annotations

from collections import Counter
from typing import Dict

from fmcluster.aws.context import Context, paginate
from fmcluster.aws.status import BAD, OK, PENDING, Describer, Item, health

HYPERPOD_NODE_OK = {"Running"}
HYPERPOD_NODE_PENDING = {"Pending", "ShuttingDown", "SystemUpdating", "DeepHealthCheckInProgress"}


def _hyperpod(ctx: Context, pid: str) -> Item:
    sm = ctx.client("sagemaker")
    c = sm.describe_cluster(ClusterName=pid)
    state = c.get("ClusterStatus", "?")
    item = Item("HyperPod cluster", c.get("ClusterName", pid), state,
                health(state, {"InService"}, {"Creating", "Updating", "SystemUpdating", "RollingBack"}),
                c.get("FailureMessage", ""))
    nodes = paginate(sm, "list_cluster_nodes", "ClusterNodeSummaries", ClusterName=pid)
    for ig in c.get("InstanceGroups", []):
        name = ig.get("InstanceGroupName", "?")
        counts = Counter(n.get("InstanceStatus", {}).get("Status", "?") for n in nodes
                         if n.get("InstanceGroupName") == name)
        cur, target = ig.get("CurrentCount", 0), ig.get("TargetCount", "?")
        healths = {health(s, HYPERPOD_NODE_OK, HYPERPOD_NODE_PENDING) for s in counts}
        group_health = BAD if BAD in healths else PENDING if PENDING in healths or cur != target else OK
        if ig.get("Status") in ("Degraded", "Failed"):
            group_health = BAD
        nodes_text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no nodes"
        item.children.append(Item("instance group", name, f"{cur}/{target} {ig.get('InstanceType', '')}", group_health,
                                  f"nodes: {nodes_text}" + (f"; group {ig['Status']}" if ig.get("Status") else "")))
    return item


DESCRIBERS: Dict[str, Describer] = {"AWS::SageMaker::Cluster": ("sagemaker", _hyperpod)}

"""`fmcluster status` for AWS PCS: the cluster and its compute node groups."""

from __future__ import annotations

from typing import Dict

from fmcluster.aws.context import Context, paginate
from fmcluster.aws.status import Describer, Item, arn_id, health


def _pcs(ctx: Context, pid: str) -> Item:
    pcs = ctx.client("pcs")
    c = pcs.get_cluster(clusterIdentifier=arn_id(pid, "cluster"))["cluster"]
    state = c.get("status", "?")
    errors = "; ".join(e.get("message", "") for e in c.get("errorInfo", []))
    item = Item("PCS cluster", c.get("name", pid), state, health(state, {"ACTIVE"}, {"CREATING", "UPDATING"}),
                errors)
    for g in paginate(pcs, "list_compute_node_groups", "computeNodeGroups", clusterIdentifier=c.get("id", pid)):
        gs = g.get("status", "?")
        item.children.append(Item("compute node group", g.get("name", "?"), gs,
                                  health(gs, {"ACTIVE"}, {"CREATING", "UPDATING"})))
    return item


DESCRIBERS: Dict[str, Describer] = {"AWS::PCS::Cluster": ("pcs", _pcs)}

"""`fmcluster status` for Amazon EKS: the cluster, its managed node groups and its add-ons."""

from __future__ import annotations

from typing import Any, Dict

from fmcluster.aws.context import Context, paginate
from fmcluster.aws.status import Describer, Item, health


def _issues(entity: Dict[str, Any]) -> str:
    issues = (entity.get("health") or {}).get("issues") or []
    return "; ".join(f"{i.get('code', '?')}: {i.get('message', '')}" for i in issues)


def _eks(ctx: Context, pid: str) -> Item:
    eks = ctx.client("eks")
    c = eks.describe_cluster(name=pid)["cluster"]
    state = c.get("status", "?")
    endpoint = c.get("resourcesVpcConfig", {})
    access = "private" if not endpoint.get("endpointPublicAccess") else "public+private"
    item = Item("EKS cluster", c.get("name", pid), f"{state} Kubernetes {c.get('version', '?')} ({access} endpoint)",
                health(state, {"ACTIVE"}, {"CREATING", "UPDATING"}), _issues(c))
    for listed in paginate(eks, "list_nodegroups", "nodegroups", clusterName=pid):
        name = str(listed)
        g = eks.describe_nodegroup(clusterName=pid, nodegroupName=name)["nodegroup"]
        gs = g.get("status", "?")
        scaling = g.get("scalingConfig", {})
        block = (" (a Capacity Block group: its nodes launch when the block starts; launch errors before it are "
                 "expected)" if g.get("capacityType") == "CAPACITY_BLOCK" else "")
        item.children.append(Item(
            "node group", name, f"{gs} {scaling.get('desiredSize', '?')} x {','.join(g.get('instanceTypes') or ['?'])} "
            f"{g.get('capacityType', '')}{block}", health(gs, {"ACTIVE"}, {"CREATING", "UPDATING"}), _issues(g)))
    for listed in paginate(eks, "list_addons", "addons", clusterName=pid):
        name = str(listed)
        a = eks.describe_addon(clusterName=pid, addonName=name)["addon"]
        s = a.get("status", "?")
        item.children.append(Item("add-on", name, f"{s} {a.get('addonVersion', '')}",
                                  health(s, {"ACTIVE"}, {"CREATING", "UPDATING"}), _issues(a)))
    return item


DESCRIBERS: Dict[str, Describer] = {"AWS::EKS::Cluster": ("eks", _eks)}

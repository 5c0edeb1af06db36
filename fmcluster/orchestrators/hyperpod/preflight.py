"""Preflight checks of SageMaker HyperPod: instance quotas per ml. type and in total."""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Any, Dict, List

from fmcluster.aws.context import Context, PreflightCheck, paginate
from fmcluster.aws.quotas import find_quota, judge
from fmcluster.aws.results import FAIL, PASS, SKIP, WARN, Outcome
from fmcluster.orchestrators.hyperpod.settings import extra_instances
from fmcluster.runtime.contract import ml_type as contract_ml_type


def checks(spec: Any) -> List[PreflightCheck]:
    found = [PreflightCheck(f"quota:hyperpod:{ml}", f"HyperPod quota {ml}", "service-quotas",
                            partial(check_hyperpod_type, ml_type=ml))
             for ml in sorted(hyperpod_demand(spec))]
    found.append(PreflightCheck("quota:hyperpod-instances", "HyperPod instance totals", "service-quotas",
                                check_hyperpod_totals))
    return found


def hyperpod_demand(spec: Any) -> Dict[str, int]:
    """ml.* instance counts the HyperPod cluster draws from the 'for cluster usage' quotas
    (training-plan groups use the plan's reserved capacity instead)."""
    out: Dict[str, int] = defaultdict(int)
    for g in spec.node_groups:
        if g.capacity.type != "training-plan":
            out[contract_ml_type(g.instance_type)] += g.count
    for extra in extra_instances(spec):  # the controller and login groups count too
        out[extra.instance_type] += extra.count
    return dict(out)


def _hyperpod_in_use(ctx: Context) -> Dict[str, int]:
    """Instances of other HyperPod clusters in the region, by ml. type."""
    if "hyperpod_in_use" not in ctx.cache:
        sm = ctx.client("sagemaker")
        used: Dict[str, int] = defaultdict(int)
        for c in paginate(sm, "list_clusters", "ClusterSummaries"):
            if c.get("ClusterName") == ctx.spec.name:
                continue
            desc = sm.describe_cluster(ClusterName=c["ClusterArn"])
            for ig in desc.get("InstanceGroups", []):
                used[ig.get("InstanceType", "")] += int(ig.get("CurrentCount", 0))
        ctx.cache["hyperpod_in_use"] = dict(used)
    return dict(ctx.cache["hyperpod_in_use"])


def check_hyperpod_type(ctx: Context, ml_type: str) -> Outcome:
    name = f"{ml_type} for cluster usage"
    need = hyperpod_demand(ctx.spec).get(ml_type, 0)
    q = find_quota(ctx, "sagemaker", lambda n: n.strip().lower() == name.lower())
    if q is None:
        return Outcome(FAIL, f"no SageMaker quota named '{name}' in {ctx.region} (looked up by name)",
                       f"'{name}' >= {need}",
                       f"request '{name}' in Service Quotas (SageMaker); HyperPod may not offer {ml_type} here")
    in_use = _hyperpod_in_use(ctx).get(ml_type, 0)
    return judge(need, in_use, float(q["Value"]), "", "instances", name,
                  f" ({q.get('QuotaCode', '?')}, looked up by name)")


def check_hyperpod_totals(ctx: Context) -> Outcome:
    total = sum(hyperpod_demand(ctx.spec).values())
    per_cluster = find_quota(ctx, "sagemaker", lambda n: "instances" in n.lower() and "per sagemaker hyperpod cluster"
                             in n.lower())
    across = find_quota(ctx, "sagemaker", lambda n: "instances" in n.lower() and "across sagemaker hyperpod clusters"
                        in n.lower())
    if per_cluster is None and across is None:
        return Outcome(SKIP, "no HyperPod instance-count quotas found by name", f">= {total} instances",
                       "confirm HyperPod quotas in the Service Quotas console")
    parts, worst = [], PASS
    for q in (per_cluster, across):
        if q is None:
            continue
        limit = float(q["Value"])
        in_use = sum(_hyperpod_in_use(ctx).values()) if q is across else 0
        parts.append(f"'{q['QuotaName']}' {limit:g} ({in_use} in use)")
        if total > limit:
            worst = FAIL
        elif total + in_use > limit and worst == PASS:
            worst = WARN
    return Outcome(worst, "; ".join(parts) + f"; spec needs {total}", f"{total} instances within each",
                   "" if worst == PASS else "request an increase of the HyperPod instance quota(s) above")

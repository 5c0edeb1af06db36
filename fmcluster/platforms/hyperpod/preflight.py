"""Preflight checks of SageMaker HyperPod: instance quotas per ml. type and in total.

Quota names are the SageMaker HyperPod prerequisites page's, matched exactly (docs/preflight.md): the
account-wide on-demand total "Total number of instances allowed across SageMaker HyperPod clusters"
(L-3308CCC7) has a Spot sibling (L-97A2C724) that a substring match also picked.

Training-plan instance groups are counted too. No AWS document says whether instances that run on a training
plan's reserved capacity count against these quotas (the plans have quotas of their own), so a shortfall that
only the training-plan instances cause is a warning that says so, not a failure.
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Any, Dict, List, Optional

from fmcluster.aws.context import Context, PreflightCheck, paginate
from fmcluster.aws.quotas import find_quota, judge, named, unknown_service
from fmcluster.aws.results import FAIL, PASS, WARN, Outcome
from fmcluster.runtime.contract import ml_type as contract_ml_type

PER_CLUSTER_QUOTA = "Maximum number instances allowed per SageMaker HyperPod cluster"  # L-2CE978FC
ACROSS_CLUSTERS_QUOTA = "Total number of instances allowed across SageMaker HyperPod clusters"  # L-3308CCC7
TRAINING_PLAN_NOTE = ("no AWS document says whether training-plan instances count against it (docs/preflight.md); "
                      "they are counted")


def checks(spec: Any) -> List[PreflightCheck]:
    found = [PreflightCheck(f"quota:hyperpod:{ml}", f"HyperPod quota {ml}", "service-quotas",
                            partial(check_hyperpod_type, ml_type=ml))
             for ml in sorted(hyperpod_demand(spec))]
    found.append(PreflightCheck("quota:hyperpod-instances", "HyperPod instance totals", "service-quotas",
                                check_hyperpod_totals))
    return found


def hyperpod_demand(spec: Any, *, training_plans: Optional[bool] = None) -> Dict[str, int]:
    """ml.* instance counts of the HyperPod cluster: every node group plus the kind's extra instance groups
    (controller and login on Slurm, the system group on EKS).

    `training_plans` True counts only the node groups on a training plan, False only the others, None all.
    """
    out: Dict[str, int] = defaultdict(int)
    for g in spec.node_groups:
        on_plan = g.capacity.type == "training-plan"
        if training_plans is None or training_plans == on_plan:
            out[contract_ml_type(g.instance_type)] += g.max_size  # an elastic group may grow to max_count
    if not training_plans:
        for extra in spec.orchestrator_kind.extra_instances(spec):  # controller, login or system groups count too
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


def judge_with_plans(need: int, on_plans: int, in_use: float, limit: float, name: str, extra: str) -> Outcome:
    """`judge`, except that a shortfall only the `on_plans` training-plan instances cause is a warning."""
    out = judge(need, in_use, limit, "", "instances", name, extra)
    if on_plans:
        out.observed += f" ({on_plans} on training plans: {TRAINING_PLAN_NOTE})"
        if out.status == FAIL and need - on_plans <= limit:
            out.status = WARN
    return out


def check_hyperpod_type(ctx: Context, ml_type: str) -> Outcome:
    name = f"{ml_type} for cluster usage"
    need = hyperpod_demand(ctx.spec).get(ml_type, 0)
    on_plans = hyperpod_demand(ctx.spec, training_plans=True).get(ml_type, 0)
    skip = unknown_service(ctx, "sagemaker", f"'{name}'")
    if skip is not None:
        return skip
    q = find_quota(ctx, "sagemaker", named(name))
    if q is None:
        # the name's spelling is documented, its code is not public: not finding it is no proof either way, and
        # docs/preflight.md says a quota not found warns
        return Outcome(WARN, f"no SageMaker quota named '{name}' in {ctx.region} (looked up by name): not checked",
                       f"'{name}' >= {need}",
                       f"find the quota in Service Quotas (SageMaker) and request '{name}' >= {need}; HyperPod may "
                       f"not offer {ml_type} here")
    in_use = _hyperpod_in_use(ctx).get(ml_type, 0)
    return judge_with_plans(need, on_plans, in_use, float(q["Value"]), name,
                            f" ({q.get('QuotaCode', '?')}, looked up by name)")


def check_hyperpod_totals(ctx: Context) -> Outcome:
    total = sum(hyperpod_demand(ctx.spec).values())
    on_plans = sum(hyperpod_demand(ctx.spec, training_plans=True).values())
    skip = unknown_service(ctx, "sagemaker", "the HyperPod instance totals")
    if skip is not None:
        return skip
    found = [(q, in_use) for q, in_use in (
        (find_quota(ctx, "sagemaker", named(PER_CLUSTER_QUOTA)), 0),  # this cluster alone
        (find_quota(ctx, "sagemaker", named(ACROSS_CLUSTERS_QUOTA)), None),  # + every other cluster
    ) if q is not None]
    if not found:
        return Outcome(WARN, f"no quota named '{PER_CLUSTER_QUOTA}' or '{ACROSS_CLUSTERS_QUOTA}': not checked",
                       f">= {total} instances", "confirm HyperPod quotas in the Service Quotas console")
    verdicts = []
    for q, in_use in found:
        used = sum(_hyperpod_in_use(ctx).values()) if in_use is None else in_use
        verdicts.append(judge_with_plans(total, on_plans, used, float(q["Value"]), str(q["QuotaName"]),
                                         f" ({q.get('QuotaCode', '?')})"))
    rank = {PASS: 0, WARN: 1, FAIL: 2}
    worst = max(verdicts, key=lambda o: rank[o.status])
    return Outcome(worst.status, "; ".join(f"'{q['QuotaName']}': {o.observed}" for (q, _), o in zip(found, verdicts)),
                   f"{total} instances within each", "; ".join(o.remedy for o in verdicts if o.remedy))

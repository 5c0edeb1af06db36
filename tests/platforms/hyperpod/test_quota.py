"""SageMaker HyperPod instance quotas: exact names, so the Spot total is never taken
for the on-demand one, and training-plan groups counted (Stubber answers with the real names and codes)."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from helpers.aws import ACCOUNT, group, make_ctx, make_spec, stubbed

from fmcluster.platforms.hyperpod import preflight as hyperpod_preflight

pytestmark = pytest.mark.usefixtures("moto")

PLAN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-plan/big-run"
PER_CLUSTER = ("L-2CE978FC", "Maximum number instances allowed per SageMaker HyperPod cluster")
ACROSS = ("L-3308CCC7", "Total number of instances allowed across SageMaker HyperPod clusters")
SPOT_ACROSS = ("L-97A2C724", "Total number of Spot instances allowed across SageMaker HyperPod clusters")
P5_USAGE = ("L-8762A75F", "ml.p5.48xlarge for cluster usage")
P5_SPOT = ("L-F742E2D7", "ml.p5.48xlarge for cluster spot instance usage")


def q(quota: Any, value: float) -> Dict[str, Any]:
    code, name = quota
    return {"ServiceCode": "sagemaker", "QuotaCode": code, "QuotaName": name, "Value": value}


def ctx_with(spec: Any, quotas: List[Dict[str, Any]], other_clusters: int = 0) -> Any:
    ctx = make_ctx(spec)
    sq = stubbed(ctx, "service-quotas")
    sq.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "sagemaker"})
    sq.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
    sm = stubbed(ctx, "sagemaker")
    arn = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/abcdef123456"
    summaries = [{"ClusterArn": arn, "ClusterName": "other", "CreationTime": "2026-01-01T00:00:00Z",
                  "ClusterStatus": "InService"}] if other_clusters else []
    sm.add_response("list_clusters", {"ClusterSummaries": summaries})
    if other_clusters:
        sm.add_response("describe_cluster", {
            "ClusterArn": arn, "ClusterName": "other", "ClusterStatus": "InService",
            "InstanceGroups": [{"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge",
                                "CurrentCount": other_clusters}]})
    return ctx


def hyperpod(*groups: Dict[str, Any]) -> Any:
    return make_spec(orchestrator={"type": "hyperpod-slurm"}, node_groups=list(groups))


def test_the_spot_total_is_not_the_on_demand_total() -> None:
    # only the Spot quotas exist here: a substring matcher took the Spot total (0 by default) for the
    # on-demand one and failed; no on-demand total found warns (docs/preflight.md: a quota not found is not a pass)
    # and names the quotas it looked for
    ctx = ctx_with(hyperpod(group(count=3)), [q(SPOT_ACROSS, 0), q(P5_SPOT, 0)])
    out = hyperpod_preflight.check_hyperpod_totals(ctx)
    assert out.status == "warn" and "not checked" in out.observed, out
    assert ACROSS[1] in out.observed and PER_CLUSTER[1] in out.observed


def test_totals_by_exact_name() -> None:
    quotas = [q(PER_CLUSTER, 3), q(ACROSS, 100), q(SPOT_ACROSS, 0)]
    out = hyperpod_preflight.check_hyperpod_totals(ctx_with(hyperpod(group(count=3)), quotas))
    assert out.status == "fail", out  # 3 p5 + the controller
    assert f"'{PER_CLUSTER[1]}': quota 3 instances, 0 in use, spec needs 4 (L-2CE978FC)" in out.observed
    assert f"'{ACROSS[1]}': quota 100 instances, 0 in use, spec needs 4 (L-3308CCC7)" in out.observed
    quotas = [q(PER_CLUSTER, 10), q(ACROSS, 6)]
    out = hyperpod_preflight.check_hyperpod_totals(ctx_with(hyperpod(group(count=3)), quotas, other_clusters=4))
    assert out.status == "warn" and "quota 6 instances, 4 in use, spec needs 4" in out.observed


def plan_group(count: int) -> Dict[str, Any]:
    return group("plan", count=count, capacity={"type": "training-plan", "training_plan_arn": PLAN})


def test_training_plan_groups_are_counted_in_the_totals() -> None:
    spec = hyperpod(group(count=2), plan_group(4))
    assert hyperpod_preflight.hyperpod_demand(spec) == {"ml.p5.48xlarge": 6, "ml.m5.12xlarge": 1}
    out = hyperpod_preflight.check_hyperpod_totals(ctx_with(spec, [q(PER_CLUSTER, 5), q(ACROSS, 100)]))
    assert out.status == "warn", out  # 7 > 5, but only because of the 4 training-plan instances
    assert "spec needs 7 (L-2CE978FC) (4 on training plans: no AWS document says" in out.observed
    out = hyperpod_preflight.check_hyperpod_totals(ctx_with(spec, [q(PER_CLUSTER, 2), q(ACROSS, 100)]))
    assert out.status == "fail", out  # even without the plan's instances 3 > 2


def test_training_plan_groups_are_counted_per_type() -> None:
    spec = hyperpod(plan_group(4))
    ids = [p.id for p in hyperpod_preflight.checks(spec)]
    assert "quota:hyperpod:ml.p5.48xlarge" in ids
    out = hyperpod_preflight.check_hyperpod_type(ctx_with(spec, [q(P5_USAGE, 2)]), "ml.p5.48xlarge")
    assert out.status == "warn" and "spec needs 4 (L-8762A75F, looked up by name) (4 on training plans" \
        in out.observed

"""`plan` on examples/hyperpod-eks-p5en-training-plan.yaml prices its managed tier: a copy into host memory that
training waits for, a restore from a neighbour's replica, and whether the spec's memory share holds the copies."""

from __future__ import annotations

import pytest
from helpers.resume_jobs import ROOT, example_data

from fmcluster.planner.checkpoint_tier import MANAGED_COPIES_PER_NODE
from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build
from fmcluster.registry import load_spec, parse_spec


def tier_of(spec):
    return build(spec, preset("llama3.1-70b"), PlanOptions())["jobs"][0]["checkpoint"]


def test_the_managed_tier_waits_for_the_copy_to_host_memory_and_checks_the_memory_share():
    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5en-training-plan.yaml")
    ck = tier_of(spec)
    memory = next(t for t in ck["targets"] if t["target"] == "HyperPod memory tier")
    tier = ck["tier"]
    assert tier["tier"] == "managed" and tier["unverified"]
    assert tier["blocking"]["value"] == pytest.approx(memory["write"]["value"], rel=1e-4)
    (group,) = spec.gpu_groups
    (room,) = tier["fits"]
    assert room["have_bytes"] == pytest.approx(spec.checkpoints.memory_percent / 100 * group.instance.memory_mib * 2**20)
    assert room["need_bytes"] == pytest.approx(MANAGED_COPIES_PER_NODE * ck["size"]["value"] / group.count, rel=1e-4)
    assert room["fits"] is True


def test_too_small_a_memory_share_is_flagged():
    data = example_data("hyperpod-eks-p5en-training-plan")
    data["node_groups"][0]["count"] = 2  # 988 GB over 2 nodes: 2 x 494 GB per node > 20% of 2 TiB
    data["orchestrator"]["task_governance"]["teams"][0]["gpus"]["h200"] = 16
    assert tier_of(parse_spec(data))["tier"]["fits"][0]["fits"] is False

"""Elastic ParallelCluster queues: MinCount is the group's floor (static nodes), MaxCount its ceiling (the rest are
dynamic nodes Slurm starts for jobs); the older per-queue min_count still works alone but not beside a range."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from helpers import ROOT
from helpers.parallelcluster import configuration, make_spec

from fmcluster.orchestrators.parallelcluster.config import ClusterInputs, cluster_configuration
from fmcluster.registry import load_spec
from fmcluster.spec import SpecError

INPUTS = ClusterInputs(subnet_id="subnet-0123456789abcdef0", security_group_id="sg-0123456789abcdef0",
                       head_node_policy_arn="arn:aws:iam::123456789012:policy/parallelcluster-h",
                       compute_policy_arn="arn:aws:iam::123456789012:policy/parallelcluster-c",
                       placement_groups={"gpu": "fm-gpu-pg"})


def gpu(**kw: Any) -> Dict[str, Any]:
    return {"name": "gpu", "instance_type": "p5.48xlarge", "count": 4, **kw}


def compute_resource(settings: Any = None, **group: Any) -> Dict[str, Any]:
    config = cluster_configuration(make_spec(settings, node_groups=[gpu(**group)]), INPUTS)
    (cr,) = config["Scheduling"]["SlurmQueues"][0]["ComputeResources"]
    return cr


@pytest.mark.parametrize("group, counts", [
    ({}, (4, 4)),
    ({"max_count": 16}, (4, 16)),
    ({"min_count": 0, "max_count": 16}, (0, 16)),
    ({"min_count": 2}, (2, 4)),
])
def test_min_and_max_count_are_the_groups_range(group, counts):
    cr = compute_resource(**group)
    assert (cr["MinCount"], cr["MaxCount"]) == counts


def test_the_queues_own_min_count_still_sets_the_static_nodes_alone():
    cr = compute_resource({"queues": {"gpu": {"min_count": 1}}})
    assert (cr["MinCount"], cr["MaxCount"]) == (1, 4)


def test_a_queue_min_count_beside_a_groups_range_is_refused():
    with pytest.raises(SpecError) as e:
        make_spec({"queues": {"gpu": {"min_count": 1}}}, node_groups=[gpu(max_count=8)])
    assert any(ln.startswith("orchestrator.parallelcluster.queues.gpu.min_count: node_groups[0] gives its own range")
               for ln in e.value.problems), e.value.problems


def test_the_example_runs_its_cpu_queue_from_zero_to_eight(synth_example):
    spec = load_spec(ROOT / "examples" / "parallelcluster-p5.yaml")
    config = configuration(synth_example("parallelcluster-p5")[spec.stack_name("cluster")])
    counts = {q["Name"]: (q["ComputeResources"][0]["MinCount"], q["ComputeResources"][0]["MaxCount"])
              for q in config["Scheduling"]["SlurmQueues"]}
    assert counts == {"h100": (4, 4), "prep": (0, 8)}
    assert spec.orchestrator_kind.expected_nodes(spec)["prep"] == 0

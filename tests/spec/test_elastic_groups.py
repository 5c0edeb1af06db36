"""Elastic node groups: `count` is the size a group is deployed and planned at, `min_count`/`max_count` the range a
scaler or the scheduler may move it in. The range is checked once for every kind; quotas and addresses use the
ceiling."""

from __future__ import annotations

import copy
from typing import Any, Dict, List

import pytest

from fmcluster.aws.quotas import ec2_vcpu_demand
from fmcluster.planner.cost import hourly_cost
from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError

CR = "cr-0123456789abcdef0"
BASE: Dict[str, Any] = {
    "name": "fm-elastic",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}


def spec(orchestrator: str = "none", **group: Any) -> Dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["node_groups"][0].update(group)
    if orchestrator == "eks":
        data["orchestrator"] = {"type": "eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"]}}
    elif orchestrator != "none":
        data["orchestrator"] = {"type": orchestrator}
    return data


def problems(data: Dict[str, Any]) -> List[str]:
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    return e.value.problems


def at(lines: List[str], path: str) -> List[str]:
    return [line for line in lines if line.startswith(f"{path}: ")]


def test_a_group_without_a_range_is_static():
    g = parse_spec(spec()).node_groups[0]
    assert (g.min_size, g.count, g.max_size, g.elastic) == (2, 2, 2, False)


def test_a_range_defaults_each_end_to_count():
    g = parse_spec(spec("parallelcluster", count=2, max_count=8)).node_groups[0]
    assert (g.min_size, g.max_size, g.elastic) == (2, 8, True)
    g = parse_spec(spec("parallelcluster", count=2, min_count=0)).node_groups[0]
    assert (g.min_size, g.max_size, g.elastic) == (0, 2, True)


@pytest.mark.parametrize("group, path, words", [
    ({"count": 4, "min_count": 5, "max_count": 8}, "min_count", "exceeds count 4"),
    ({"count": 4, "max_count": 3}, "max_count", "below count 4"),
    ({"count": 4, "max_count": 4096}, "max_count", "less than or equal to 2048"),
    ({"count": 4, "min_count": -1}, "min_count", "greater than or equal to 0"),
])
def test_the_range_must_hold_count(group, path, words):
    lines = at(problems(spec("parallelcluster", **group)), f"node_groups[0].{path}")
    assert any(words in line for line in lines), lines


def test_a_capacity_block_group_is_sized_to_its_block():
    data = spec("parallelcluster", count=4, min_count=0, max_count=4,
                capacity={"type": "capacity-block", "reservation_id": CR})
    (line,) = at(problems(data), "node_groups[0].max_count")
    assert "sized to its block" in line and "ec2-capacity-blocks.html" in line


def test_a_reservation_must_hold_the_ceiling_not_only_count():
    data = spec("parallelcluster", count=2, max_count=6, capacity={"type": "odcr", "reservation_id": CR, "size": 4})
    (line,) = at(problems(data), "node_groups[0].max_count")
    assert "6 exceeds capacity.size 4" in line


@pytest.mark.parametrize("orchestrator, words", [
    ("none", "no scheduler or scaler runs here"),
    ("hyperpod-slurm", "EKS-orchestrated clusters only; a Slurm cluster's instance groups change size through "
                       "UpdateCluster (https://"),
])
def test_kinds_without_a_scaler_refuse_a_range_with_the_reason(orchestrator, words):
    data = spec(orchestrator, count=2, min_count=0)
    if orchestrator == "hyperpod-slurm":
        data["node_groups"][0]["instance_type"] = "ml.p5.48xlarge"
    lines = at(problems(data), "node_groups[0].min_count")
    assert len(lines) == 1 and words in lines[0], lines
    assert f"orchestrator {orchestrator} takes no elastic node groups" in lines[0]


def test_quotas_and_addresses_are_for_the_ceiling():
    static = parse_spec(spec("parallelcluster", count=2))
    elastic = parse_spec(spec("parallelcluster", count=2, min_count=0, max_count=8))
    assert ec2_vcpu_demand(elastic)["p"] - ec2_vcpu_demand(static)["p"] == 6 * 192
    per_node = elastic.node_groups[0].instance.ip_interfaces
    assert elastic.node_ip_addresses - static.node_ip_addresses == 6 * per_node


def test_cost_is_priced_at_count_with_the_ceiling_beside_it():
    cost = hourly_cost(parse_spec(spec("parallelcluster", count=2, min_count=0, max_count=8)))
    line = next(ln for ln in cost["lines"] if ln["item"] == "node group gpu")
    each = line["usd_per_hour_each"]
    assert line["count"] == 2 and line["usd_per_hour"]["value"] == pytest.approx(2 * each)
    assert line["usd_per_hour_at_max"]["value"] == pytest.approx(8 * each)
    assert cost["elastic"] and cost["max_usd_per_hour"]["value"] - cost["total_usd_per_hour"]["value"] == \
        pytest.approx(6 * each)


def test_expected_nodes_are_the_floor():
    data = spec("pcs", count=2, min_count=1, max_count=4, ami_id="ami-0123456789abcdef0",
                image_family="dlami-ubuntu-22.04")
    s = parse_spec(data)
    assert s.orchestrator_kind.expected_nodes(s) == {"gpu": 1}

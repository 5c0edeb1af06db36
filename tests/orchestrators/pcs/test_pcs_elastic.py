"""Elastic PCS node groups: the compute node group's scaling configuration is the group's range (min_count static
instances, up to max_count started for queued jobs), and the controller is sized for the ceiling."""

from __future__ import annotations

import copy
from typing import Any, Dict

import pytest
from helpers import resources_of

from fmcluster.orchestrators.pcs.settings import instances
from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError

AMI = "ami-0123456789abcdef0"
BASE: Dict[str, Any] = {
    "name": "pcs-elastic", "region": "us-east-1", "availability_zone": "us-east-1a",
    "orchestrator": {"type": "pcs"},
    "node_groups": [{"name": "h100", "instance_type": "p5.48xlarge", "count": 4, "ami_id": AMI,
                     "image_family": "dlami-ubuntu-22.04"}],
}


def spec(**group: Any) -> Dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["node_groups"][0].update(group)
    return data


@pytest.fixture(scope="module")
def p5(synth_example):
    return synth_example("pcs-p5")["pcs-p5-cluster"]


def test_the_example_scales_between_its_static_nodes_and_max_count(p5):
    groups = {v["Properties"]["Name"]: v["Properties"] for v in resources_of(p5, "AWS::PCS::ComputeNodeGroup").values()}
    assert groups["h100"]["ScalingConfiguration"] == {"MinInstanceCount": 4, "MaxInstanceCount": 8}
    assert groups["login"]["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}


def test_the_controller_is_sized_for_the_ceiling():
    s = parse_spec(spec(count=4, min_count=0, max_count=40))
    assert instances(s) == 41
    with pytest.raises(SpecError) as e:
        parse_spec({**spec(count=4, min_count=0, max_count=40), "orchestrator": {"type": "pcs", "pcs": {"size": "SMALL"}}})
    lines = [ln for ln in e.value.problems if ln.startswith("orchestrator.pcs.size: ")]
    assert lines and "the spec has 41" in lines[0]


def test_a_capacity_block_group_stays_sized_to_its_block():
    data = spec(count=4, max_count=8, capacity={"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"},
                placement=None)
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    assert any(ln.startswith("node_groups[0].max_count: a Capacity Block group is sized to its block")
               for ln in e.value.problems), e.value.problems

"""Automatic recovery on EKS: every managed node group has node auto-repair on, and the EKS node monitoring agent
add-on sets the node conditions it acts on (EKS user guide, "Automatically repair nodes in EKS clusters")."""

from __future__ import annotations

import pytest
from helpers import ROOT, resources_of

from fmcluster.registry import load_spec


@pytest.fixture(scope="module")
def template(synth_example):
    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    return synth_example("eks-p5")[spec.stack_name("cluster")]


def test_every_managed_node_group_repairs_itself(template):
    groups = {r["Properties"]["NodegroupName"]: r["Properties"]
              for r in resources_of(template, "AWS::EKS::Nodegroup").values()}
    assert len(groups) >= 2  # the GPU group(s) and the system group
    assert {name: g.get("NodeRepairConfig") for name, g in groups.items()} == \
        {name: {"Enabled": True} for name in groups}


def test_the_node_monitoring_agent_sets_the_conditions_repair_acts_on(template):
    addons = {r["Properties"]["AddonName"] for r in resources_of(template, "AWS::EKS::Addon").values()}
    assert "eks-node-monitoring-agent" in addons


def test_eks_groups_stay_static_until_an_autoscaler_is_deployed(template):
    groups = [r["Properties"] for r in resources_of(template, "AWS::EKS::Nodegroup").values()]
    for g in groups:
        scaling = g["ScalingConfig"]
        assert scaling["MinSize"] == scaling["MaxSize"] or scaling["MinSize"] == 0, scaling  # 0: a Capacity Block

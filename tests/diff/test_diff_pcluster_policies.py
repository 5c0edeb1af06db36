"""The ParallelCluster update policies `fmcluster diff` applies are the ones ParallelCluster's own checker
(ConfigPatch, run offline in .venv-pcluster by scripts/pcluster_update_check.py) gives for the same change."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers.parallelcluster import configuration, pcluster_update_check, with_placeholders

from fmcluster.diff.nodes import PCLUSTER_DEFAULT_POLICY, PCLUSTER_POLICIES

ROOT = Path(__file__).resolve().parents[2]
PCLUSTER_PYTHON = ROOT / ".venv-pcluster" / "bin" / "python"


def queue(c):
    return c["Scheduling"]["SlurmQueues"][0]


CHANGES = {
    "InstanceType": lambda c: queue(c)["ComputeResources"][0].update(InstanceType="p5en.48xlarge"),
    "MinCount": lambda c: queue(c)["ComputeResources"][0].update(MinCount=1),
    "SlurmQueues": lambda c: c["Scheduling"]["SlurmQueues"].pop(0),
    "Args": lambda c: queue(c)["CustomActions"]["OnNodeConfigured"]["Args"].append("--next"),
    "CapacityType": lambda c: queue(c).update(CapacityType="SPOT"),
}


@pytest.mark.parametrize("parameter", sorted(CHANGES))
def test_the_policy_table_agrees_with_parallelclusters_checker(parameter, tmp_path):
    if not PCLUSTER_PYTHON.exists():
        pytest.fail("ParallelCluster is not installed: run `make setup` (it creates .venv-pcluster)")
    template = json.loads((ROOT / "templates" / "parallelcluster-p5" / "pc-p5-cluster.template.json").read_text())
    base = with_placeholders(configuration(template), distinct=True)
    if parameter == "SlurmQueues":  # a second queue to remove, so the configuration stays valid
        extra = copy.deepcopy(queue(base))
        extra["Name"] = "spare"
        base["Scheduling"]["SlurmQueues"].append(extra)
        target = copy.deepcopy(base)
        target["Scheduling"]["SlurmQueues"].pop()
    else:
        target = copy.deepcopy(base)
        CHANGES[parameter](target)
    _, report = pcluster_update_check(PCLUSTER_PYTHON, base, target, "pc-p5", tmp_path)
    policies = {c["parameter"]: c["policy"] for c in report["changes"]}
    assert policies.get(parameter) == PCLUSTER_POLICIES.get(parameter, PCLUSTER_DEFAULT_POLICY), report["changes"]

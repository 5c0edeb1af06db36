"""Per-node absence alerts from the spec's counts and a GPUs-per-node alert, rendered into the
rule groups at synth (fmcluster/observability/inventory.py) and tested with promtool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fmcluster import observability as obs
from fmcluster.observability.inventory import ExpectedNodes
from fmcluster.registry import parse_spec
from fmcluster.stacks.observability import expected_nodes

HERE = Path(__file__).parent


def test_the_rendered_rules_fire_on_a_silent_node_and_a_missing_gpu(tmp_path, promtool):
    rules = obs.rules_text("c", [ExpectedNodes("gpu", 2, 8), ExpectedNodes("login", 1)], slurm=True)
    (tmp_path / "rules.yaml").write_text(rules)
    shutil.copy(HERE / "inventory_rules_test.yaml", tmp_path)
    out = subprocess.run([promtool, "test", "rules", "inventory_rules_test.yaml"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


AMI = {"ami_id": "ami-0123456789abcdef0", "image_family": "dlami-ubuntu-22.04"}


def test_the_expected_counts_come_from_the_spec():
    base = {"name": "fm-dev", "region": "us-east-1", "availability_zone": "us-east-1a",
            "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 4, **AMI},
                            {"name": "b200", "instance_type": "p6-b200.48xlarge", "count": 2, **AMI}]}
    assert expected_nodes(parse_spec(base)) == [ExpectedNodes("gpu", 4, 8), ExpectedNodes("b200", 2, 8)]
    pcs = parse_spec({**base, "orchestrator": {"type": "pcs"}})
    assert expected_nodes(pcs)[-1] == ExpectedNodes("login", 1, 0)  # the login node's collectors say node_group=login
    groups = [{k: v for k, v in g.items() if k not in AMI} for g in base["node_groups"]]  # HyperPod's own image
    hyperpod = parse_spec({**base, "node_groups": groups, "orchestrator": {"type": "hyperpod-slurm", "hyperpod": {
        "login_instance_type": "ml.m5.4xlarge", "login_count": 2}}})
    assert expected_nodes(hyperpod)[-2:] == [ExpectedNodes("controller", 1, 0), ExpectedNodes("login", 2, 0)]


def test_the_rendered_group_holds_one_constant_per_expectation():
    text = obs.rules_text("c", [ExpectedNodes("gpu", 2, 8), ExpectedNodes("cpu", 3)], slurm=False)
    [group] = [g for g in yaml.safe_load(text)["groups"] if g["name"] == "fmcluster.inventory"]
    constants = {(r["record"], r["labels"]["node_group"]): r["expr"] for r in group["rules"] if "record" in r}
    assert constants == {("fmcluster:expected_nodes:count", "gpu"): "vector(2)",
                         ("fmcluster:expected_gpus_per_node:count", "gpu"): "vector(8)",
                         ("fmcluster:expected_nodes:count", "cpu"): "vector(3)"}
    alerts = [r["alert"] for r in group["rules"] if "alert" in r]
    assert alerts == ["NodeGroupBelowExpected", "GpusMissingOnNode"]  # no Slurm: no SlurmCollectorAbsent


def test_the_rendered_rules_follow_the_rules_conventions():
    from fmcluster.observability import metrics

    text = obs.rules_text("c", [ExpectedNodes("gpu", 2, 8)], slurm=True)
    [group] = [g for g in yaml.safe_load(text)["groups"] if g["name"] == "fmcluster.inventory"]
    recorded = frozenset(r["record"] for r in group["rules"] if "record" in r)
    assert not metrics.unknown_metrics([r["expr"] for r in group["rules"]], recorded)
    for rule in (r for r in group["rules"] if "alert" in r):
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert all(rule["annotations"][k].strip() for k in ("summary", "description", "runbook"))
    names = obs.alert_names() + [r["alert"] for r in group["rules"] if "alert" in r]
    assert len(names) == len(set(names))


def test_a_kinds_extra_rule_groups_follow_the_static_ones_and_precede_the_inventory():
    text = obs.rules_text("c", [ExpectedNodes("gpu", 2, 8)], slurm=False, extra=["hyperpod"])
    assert text.startswith(obs.rules_text())
    names = [g["name"] for g in yaml.safe_load(text)["groups"]]
    assert names.index("fmcluster.hyperpod") == names.index("fmcluster.inventory") - 1
    assert "fmcluster.hyperpod" not in obs.rules_text("c", [ExpectedNodes("gpu", 2, 8)], slurm=False)
    with pytest.raises(ValueError):
        obs.rules_text("c", [], extra=["nope"])

"""Metrics and alerts keep ParallelCluster's node names: the collector labels a node with its short host name
(ParallelCluster's Slurm node name), the head node's Slurm collector reports ParallelCluster's nodes, and the
alert rules fire for them with those names (promtool)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from fmcluster import observability as obs
from fmcluster.runtime.observability import collector_config
from fmcluster.runtime.observability.slurm_textfile import parse_sinfo, render

STATIC = "h100-st-p5-48xlarge-1"  # <queue>-st-<compute resource>-<n>
DYNAMIC = "prep-dy-c5-18xlarge-2"  # <queue>-dy-<compute resource>-<n>


@pytest.mark.parametrize("hostname", [STATIC, f"{STATIC}.pc-p5.pcluster"])
def test_the_collector_labels_a_node_with_its_slurm_name(monkeypatch, tmp_path, hostname):
    monkeypatch.setattr(collector_config.socket, "gethostname", lambda: hostname)
    assert collector_config.node_identity(str(tmp_path))["node"] == STATIC


def test_the_head_nodes_slurm_collector_reports_parallelclusters_nodes():
    sinfo = f"{STATIC}|drained\n{STATIC}|drained\n{DYNAMIC}|idle~\nh100-st-p5-48xlarge-2|down*\n"
    nodes = parse_sinfo(sinfo)
    assert nodes == {STATIC: ("drained", True, False), DYNAMIC: ("idle", True, True),
                     "h100-st-p5-48xlarge-2": ("down", False, False)}
    text = render(nodes)
    assert f'fmcluster_slurm_node_state{{slurm_node="{STATIC}",state="drained"}} 1' in text
    assert f'fmcluster_slurm_node_state{{slurm_node="{DYNAMIC}",state="idle"}} 1' in text
    assert f'fmcluster_slurm_node_powered_down{{slurm_node="{DYNAMIC}"}} 1' in text


def _rule(name: str) -> Dict[str, Any]:
    for group in yaml.safe_load(obs.RULES_FILE.read_text())["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == name:
                return rule
    raise KeyError(name)


def _expected(name: str, labels: Dict[str, str]) -> Dict[str, Any]:
    """The alert as promtool should report it: the rule's labels and its annotations filled with `labels`."""
    rule = _rule(name)

    def fill(text: str) -> str:
        return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels[m.group(1)], text)

    return {"exp_labels": {**rule["labels"], **labels},
            "exp_annotations": {k: fill(v) for k, v in rule["annotations"].items()}}


def test_alert_rules_fire_for_parallelcluster_node_names(tmp_path: Path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: run `make setup` (scripts/install-tools.sh installs it)")
    drained = {"cluster": "pc-p5", "slurm_node": STATIC, "state": "drained"}
    failed = {"cluster": "pc-p5", "node": STATIC, "level": "standard"}
    tests: List[Dict[str, Any]] = [{
        "interval": "1m",
        "input_series": [
            {"series": f'fmcluster_slurm_node_state{{cluster="pc-p5",slurm_node="{STATIC}",state="drained"}}',
             "values": "1x20"},
            {"series": f'fmcluster_slurm_node_state{{cluster="pc-p5",slurm_node="{DYNAMIC}",state="idle"}}',
             "values": "1x20"},
            {"series": f'fmcluster_node_validation_healthy{{cluster="pc-p5",node="{STATIC}",level="standard"}}',
             "values": "0x20"},
        ],
        "alert_rule_test": [
            {"eval_time": "16m", "alertname": "SlurmNodeDrained", "exp_alerts": [_expected("SlurmNodeDrained", drained)]},
            {"eval_time": "2m", "alertname": "NodeValidationFailed",
             "exp_alerts": [_expected("NodeValidationFailed", failed)]},
        ],
    }]
    spec = tmp_path / "pc_rules_test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(obs.RULES_FILE)], "evaluation_interval": "1m", "tests": tests}))
    out = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_rule_or_dashboard_assumes_a_node_name_pattern():
    """ParallelCluster names nodes <queue>-st|dy-<resource>-<n>: any hard-coded node matcher would miss them."""
    texts = [obs.RULES_FILE.read_text()] + [json.dumps(d) for d in obs.dashboards().values()]
    matchers = set()
    for text in texts:
        matchers |= set(re.findall(r'\b(?:slurm_)?node\s*(?:=~|!~|!=|=)\s*\\?"([^"\\]*)', text))
    assert "$node" in matchers and matchers <= {"$node"}, matchers  # found, and only the variable


# --- what the inventory alerts expect --------------------------------------------------------

P5 = Path(__file__).resolve().parents[3] / "examples" / "parallelcluster-p5.yaml"


def test_only_static_nodes_are_expected_to_report():
    from fmcluster.observability.inventory import ExpectedNodes
    from fmcluster.registry import load_spec
    from fmcluster.stacks.observability import expected_nodes

    # prep: min_count 0, all dynamic (powered off when idle); h100 all static; the head node always runs
    assert expected_nodes(load_spec(P5)) == [ExpectedNodes("h100", 4, 8), ExpectedNodes("prep", 0, 0),
                                             ExpectedNodes("head-node", 1, 0)]


def test_the_deployed_rules_expect_no_dynamic_node(synth_example):
    (namespace,) = [r for r in synth_example("parallelcluster-p5")["pc-p5-observability"]["Resources"].values()
                    if r["Type"] == "AWS::APS::RuleGroupsNamespace"]
    groups = yaml.safe_load(namespace["Properties"]["Data"])["groups"]
    (inventory,) = [g for g in groups if g["name"] == "fmcluster.inventory"]
    expected = {r["labels"]["node_group"]: r["expr"] for r in inventory["rules"]
                if r.get("record") == "fmcluster:expected_nodes:count"}
    assert expected == {"h100": "vector(4)", "prep": "vector(0)", "head-node": "vector(1)"}


def _inventory_alert(name: str, labels: Dict[str, str], value: str) -> Dict[str, Any]:
    from fmcluster.observability import inventory

    rule = {"NodeGroupBelowExpected": inventory.NODE_GROUP_BELOW_EXPECTED}[name]

    def fill(text: str) -> str:
        text = re.sub(r"\{\{\s*\$value\s*\}\}", value, text)
        return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels[m.group(1)], text)

    return {"exp_labels": {**rule["labels"], **labels},
            "exp_annotations": {k: fill(v) for k, v in rule["annotations"].items()}}


def test_idle_dynamic_nodes_page_nobody_and_a_missing_static_node_does(tmp_path: Path):
    """The p5 example's rules (promtool): queue prep's dynamic node starts for a job and powers off again, and
    neither NodeGroupBelowExpected nor NodeStoppedReporting fires for it; a static h100 node that stops reporting
    fires both."""
    from fmcluster.registry import load_spec
    from fmcluster.stacks.observability import expected_nodes

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: run `make setup` (scripts/install-tools.sh installs it)")
    (tmp_path / "rules.yaml").write_text(obs.rules_text("pc-p5", expected_nodes(load_spec(P5)), slurm=True))

    def up(node: str, group: str, values: str) -> Dict[str, str]:
        return {"series": f'up{{cluster="pc-p5",job="node",node="{node}",node_group="{group}",instance_id="i-{node}"}}',
                "values": values}

    series = [up(f"h100-st-p5-48xlarge-{i}", "h100", "1x80") for i in (1, 2, 3)]
    series += [up("h100-st-p5-48xlarge-4", "h100", "1x40 _x40"),  # stops reporting at 40m
               up(DYNAMIC, "prep", "_x5 1x15 _x60"),  # powered up for a job at 5m, off again at 20m
               up("ip-10-20-0-10", "head-node", "1x80"),
               {"series": 'fmcluster_slurm_collector_success{cluster="pc-p5",node="ip-10-20-0-10"}', "values": "1x80"},
               # the head node's Slurm collector: prep's node powered down at 20m (idle~), h100-4 never was
               {"series": f'fmcluster_slurm_node_powered_down{{cluster="pc-p5",node="ip-10-20-0-10",slurm_node="{DYNAMIC}"}}',
                "values": "1x5 0x14 1x60"},
               {"series": 'fmcluster_slurm_node_powered_down{cluster="pc-p5",node="ip-10-20-0-10",'
                          'slurm_node="h100-st-p5-48xlarge-4"}', "values": "0x80"}]
    tests = [{
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": "4m", "alertname": "NodeGroupBelowExpected", "exp_alerts": []},
            {"eval_time": "17m", "alertname": "NodeGroupBelowExpected", "exp_alerts": []},
            {"eval_time": "38m", "alertname": "NodeGroupBelowExpected", "exp_alerts": []},
            {"eval_time": "65m", "alertname": "NodeGroupBelowExpected", "exp_alerts": [
                _inventory_alert("NodeGroupBelowExpected", {"cluster": "pc-p5", "node_group": "h100"}, "1")]},
            # The powered-down dynamic node is not "stopped reporting"; the silent static one is
            {"eval_time": "35m", "alertname": "NodeStoppedReporting", "exp_alerts": []},
            {"eval_time": "55m", "alertname": "NodeStoppedReporting", "exp_alerts": [_expected("NodeStoppedReporting", {
                "cluster": "pc-p5", "node": "h100-st-p5-48xlarge-4", "node_group": "h100",
                "instance_id": "i-h100-st-p5-48xlarge-4"})]},
        ],
    }]
    spec = tmp_path / "pc_inventory_test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}))
    out = subprocess.run([promtool, "test", "rules", spec.name], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr

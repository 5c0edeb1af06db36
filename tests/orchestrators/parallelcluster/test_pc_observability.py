"""Metrics and alerts keep ParallelCluster's node names: the collector labels a node with its short host name
(ParallelCluster's Slurm node name), the head node's Slurm collector reports ParallelCluster's nodes, and the
alert rules fire for them with those names (promtool)."""

from __future__ import annotations

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
    assert nodes == {STATIC: ("drained", True), DYNAMIC: ("idle", True), "h100-st-p5-48xlarge-2": ("down", False)}
    text = render(nodes)
    assert f'fmcluster_slurm_node_state{{slurm_node="{STATIC}",state="drained"}} 1' in text
    assert f'fmcluster_slurm_node_state{{slurm_node="{DYNAMIC}",state="idle"}} 1' in text


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
    texts = [obs.RULES_FILE.read_text()] + [p.read_text() for p in (obs.RULES_FILE.parent / "dashboards").glob("*.json")]
    matchers = set()
    for text in texts:
        matchers |= set(re.findall(r'\b(?:slurm_)?node\s*(?:=~|!~|!=|=)\s*\\?"([^"\\]*)', text))
    assert "$node" in matchers and matchers <= {"$node"}, matchers  # found, and only the variable

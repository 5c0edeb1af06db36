"""The alert rules and the Alertmanager configuration: promtool, amtool and the project's own conventions."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import promtool_tests, straggler_scenarios

from fmcluster import observability as obs

SEVERITIES = {"critical", "warning", "info"}

# The issue's list: each concern must have at least one alert, found by name.
REQUIRED_ALERTS = {
    "GPU Xid errors": {"GpuXidCritical", "GpuXidError"},
    "uncorrectable ECC / row remap failure": {"GpuUncorrectableEccErrors", "GpuRowRemapFailure"},
    "GPU temperature": {"GpuTemperatureHigh"},
    "clock throttling": {"GpuThermalThrottling"},
    "NVLink errors": {"NvlinkErrors"},
    "EFA error counters rising": {"EfaErrorCountersRising"},
    "exporter targets down": {"ExporterTargetDown"},
    "node validation failed": {"NodeValidationFailed"},
    "FSx free capacity low": {"FsxFreeCapacityLow"},
    "Slurm nodes drained or down": {"SlurmNodeDrained", "SlurmNodeDown"},
}


@pytest.mark.parametrize("rules", obs.rule_files(), ids=lambda p: p.name)
def test_promtool_check_rules(promtool, rules):
    out = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_promtool_rule_unit_tests(promtool, tmp_path):
    """One promtool call: the hand-written tests beside this file and the straggler scenarios
    (tests/helpers/straggler_scenarios.py), rendered into a test file of promtool's own format."""
    stragglers = tmp_path / "straggler_rules_test.yaml"
    stragglers.write_text(yaml.safe_dump(promtool_tests.test_file([str(obs.RULES_FILE)], straggler_scenarios.scenarios()),
                                         sort_keys=False, width=200))
    files = [str(Path(__file__).parent / name) for name in ("rules_test.yaml", "hyperpod_rules_test.yaml")]
    out = subprocess.run([promtool, "test", "rules", *files, str(stragglers)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_amtool_check_config(tmp_path, amtool):
    cfg = tmp_path / "alertmanager.yml"
    cfg.write_text(obs.alertmanager_config("arn:aws:sns:us-east-1:123456789012:fmcluster-alerts", "us-east-1"))
    out = subprocess.run([amtool, "check-config", str(cfg)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_alertmanager_definition_is_the_amp_wrapper():
    text = obs.alertmanager_definition("arn:aws:sns:us-east-1:123456789012:t", "us-east-1")
    doc = yaml.safe_load(text)
    inner = yaml.safe_load(doc["alertmanager_config"])
    (sns,) = inner["receivers"][0]["sns_configs"]
    assert sns["topic_arn"] == "arn:aws:sns:us-east-1:123456789012:t"
    assert sns["sigv4"] == {"region": "us-east-1"}
    # AMP rejects these (AMP user guide, SNS receiver)
    assert "api_url" not in sns and "http_config" not in sns
    assert all(set(r) == {"name", "sns_configs"} for r in inner["receivers"]), "AMP supports SNS receivers only"


def test_every_alert_has_severity_summary_and_runbook():
    problems = []
    alerts = [rule for _, rule in obs.iter_rules() if "alert" in rule]
    assert len(alerts) >= 15
    for rule in alerts:
        name = rule["alert"]
        if rule.get("labels", {}).get("severity") not in SEVERITIES:
            problems.append(f"{name}: severity must be one of {sorted(SEVERITIES)}")
        for key in ("summary", "description", "runbook"):
            if not str(rule.get("annotations", {}).get(key, "")).strip():
                problems.append(f"{name}: annotations.{key} missing")
    assert not problems, "\n".join(problems)


def test_alert_names_are_unique_and_cover_the_issue():
    names = obs.alert_names()
    assert len(names) == len(set(names))
    missing = {concern: want - set(names) for concern, want in REQUIRED_ALERTS.items() if want - set(names)}
    assert not missing


def test_recording_rules_follow_the_naming_convention():
    for _, rule in obs.iter_rules():
        if "record" in rule:
            assert re.fullmatch(r"fmcluster:[a-z0-9_]+:[a-z0-9_]+", rule["record"]), rule["record"]


@pytest.mark.parametrize("placeholder", ["__TOPIC_ARN__", "__REGION__"])
def test_alertmanager_placeholders_are_all_replaced(placeholder):
    assert placeholder not in obs.alertmanager_config("arn:aws:sns:us-east-1:123456789012:t", "us-east-1")

"""A store's alert rules live in its folder and join the cluster's AMP rule groups namespace only where the spec
configures the store; its free-capacity alerts pair up so the Alertmanager's one capacity rule silences the low one
while the critical one fires."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from fmcluster import observability as obs
from fmcluster import registry

ROOT = Path(__file__).resolve().parents[3]


def rule_namespace(example: str) -> str:
    (template,) = (ROOT / "templates" / example).glob("*-observability.template.json")
    resources = json.loads(template.read_text())["Resources"]
    (namespace,) = [r for r in resources.values() if r["Type"] == "AWS::APS::RuleGroupsNamespace"]
    return namespace["Properties"]["Data"]


def test_the_file_system_rules_join_where_the_spec_has_the_file_system_only():
    assert "name: fmcluster.storage.fsx_lustre" in rule_namespace("default")
    assert "lustre" not in rule_namespace("existing-vpc").lower()  # Mountpoint for Amazon S3 only
    assert "lustre" not in obs.RULES_FILE.read_text().lower()


def test_every_store_rule_file_is_declared_by_its_store_and_checked_with_the_others():
    declared = {s.rules for s in registry.stores() if s.rules is not None}
    assert declared == set(obs.STORE_RULE_FILES) and declared
    assert set(obs.STORE_RULE_FILES) <= set(obs.rule_files())
    groups = [g["name"] for g in obs.load_rules()["groups"]]
    assert len(groups) == len(set(groups)), "group names are unique in one namespace"


def test_free_capacity_alerts_pair_up_under_the_alert_manager_capacity_inhibition():
    for path in obs.STORE_RULE_FILES:
        alerts = [r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"] if "alert" in r]
        capacity = sorted(r["labels"]["capacity"] for r in alerts if "capacity" in r["labels"])
        assert capacity in ([], ["critical", "low"]), path
    config = yaml.safe_load(obs.alertmanager_config("arn:aws:sns:us-east-1:123456789012:t", "us-east-1"))
    assert {"source_matchers": ['capacity="critical"'], "target_matchers": ['capacity="low"'],
            "equal": ["cluster", "mountpoint"]} in config["inhibit_rules"]

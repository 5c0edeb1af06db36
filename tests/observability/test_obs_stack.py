"""`<name>-observability`: template assertions (cdk-nag has no APS/Grafana rules), cfn-lint, the public API."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import yaml

from fmcluster import observability as obs
from fmcluster.observability.inventory import ExpectedNodes

Resources = Dict[str, Dict[str, Any]]


def of_type(template: Dict[str, Any], type_: str) -> Resources:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def one(template: Dict[str, Any], type_: str) -> Tuple[str, Dict[str, Any]]:
    found = of_type(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.items()))


def logical_id_of(template: Dict[str, Any], type_: str, contains: str) -> str:
    (lid,) = [k for k in of_type(template, type_) if contains in k]
    return lid


def statements(template: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """Every policy statement in the template: IAM policies, role trust, key, topic and any other resource policy."""

    def walk(node: Any, where: str) -> Iterator[Tuple[str, Dict[str, Any]]]:
        if isinstance(node, dict):
            if "Statement" in node and isinstance(node["Statement"], list):
                for st in node["Statement"]:
                    yield where, st
            for key, value in node.items():
                yield from walk(value, where)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value, where)

    for lid, res in template["Resources"].items():
        yield from walk(res.get("Properties", {}), lid)


def resolve_join(value: Any, refs: Dict[str, str]) -> str:
    """Render a synthesized string (plain, or Fn::Join of strings and Refs) with the given Ref values."""
    if isinstance(value, str):
        return value
    sep, parts = value["Fn::Join"]
    return sep.join(p if isinstance(p, str) else refs[p["Ref"]] for p in parts)


# --- the AMP workspace ---------------------------------------------------------------------------------


def test_workspace_is_encrypted_with_a_customer_key_and_logs(synthesized):
    t = synthesized.json
    _, ws = one(t, "AWS::APS::Workspace")
    props = ws["Properties"]
    key_id = props["KmsKeyArn"]["Fn::GetAtt"][0]
    assert t["Resources"][key_id]["Type"] == "AWS::KMS::Key"
    assert t["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True
    log_group = props["LoggingConfiguration"]["LogGroupArn"]["Fn::GetAtt"]
    assert log_group[1] == "Arn"
    lg = t["Resources"][log_group[0]]
    assert lg["Type"] == "AWS::Logs::LogGroup"
    assert lg["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert lg["Properties"]["RetentionInDays"] == 90
    assert props["Alias"] == "fmcluster-obs-test"


def test_rule_groups_namespace_holds_the_rules(synthesized):
    t = synthesized.json
    _, ns = one(t, "AWS::APS::RuleGroupsNamespace")
    ws_id, _ = one(t, "AWS::APS::Workspace")
    assert ns["Properties"]["Workspace"] == {"Fn::GetAtt": [ws_id, "Arn"]}
    data = ns["Properties"]["Data"]
    assert data.startswith(obs.rules_text())  # rules.yaml verbatim, then the group rendered from the spec
    assert data == obs.rules_text("obs-test", [ExpectedNodes("gpu", 2, 8)], slurm=False)
    assert ns["Properties"]["Name"] == "fmcluster"


def test_synthesized_rules_pass_promtool(synthesized, tmp_path, promtool):
    _, ns = one(synthesized.json, "AWS::APS::RuleGroupsNamespace")
    rules = tmp_path / "rules.yaml"
    rules.write_text(ns["Properties"]["Data"])
    out = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_synthesized_alert_manager_definition_passes_amtool(synthesized, tmp_path, amtool):
    t = synthesized.json
    topic_id, _ = one(t, "AWS::SNS::Topic")
    _, ws = one(t, "AWS::APS::Workspace")
    topic_arn = "arn:aws:sns:us-east-1:123456789012:obs-test-alerts"
    definition = resolve_join(ws["Properties"]["AlertManagerDefinition"], {topic_id: topic_arn})
    config = yaml.safe_load(definition)["alertmanager_config"]
    (sns,) = yaml.safe_load(config)["receivers"][0]["sns_configs"]
    assert sns["topic_arn"] == topic_arn and sns["sigv4"]["region"] == "us-east-1"
    path = tmp_path / "am.yml"
    path.write_text(config)
    out = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


# --- alerts: SNS ----------------------------------------------------------------------------------------


def test_alert_topic_is_encrypted_and_has_the_email_subscriptions(synthesized):
    t = synthesized.json
    topic_id, topic = one(t, "AWS::SNS::Topic")
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    assert t["Resources"][key_id]["Type"] == "AWS::KMS::Key"
    subscriptions = of_type(t, "AWS::SNS::Subscription").values()
    subs = sorted((s["Properties"]["Protocol"], s["Properties"]["Endpoint"]) for s in subscriptions)
    assert subs == [("email", "gpu-team@example.com"), ("email", "oncall@example.com")]
    assert all(s["Properties"]["TopicArn"] == {"Ref": topic_id} for s in of_type(t, "AWS::SNS::Subscription").values())
    assert of_type(synthesized.plain_json, "AWS::SNS::Subscription") == {}


def test_topic_policy_lets_this_workspace_publish_and_requires_tls(synthesized):
    t = synthesized.json
    ws_id, _ = one(t, "AWS::APS::Workspace")
    _, policy = one(t, "AWS::SNS::TopicPolicy")
    sts = policy["Properties"]["PolicyDocument"]["Statement"]
    (aps,) = [s for s in sts if s.get("Principal") == {"Service": "aps.amazonaws.com"}]
    assert aps["Effect"] == "Allow"
    assert sorted(aps["Action"]) == ["sns:GetTopicAttributes", "sns:Publish"]
    assert aps["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [ws_id, "Arn"]}},
    }
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in sts)


def test_alert_key_lets_aps_and_cloudwatch_use_it_for_this_account_only(synthesized):
    t = synthesized.json
    _, topic = one(t, "AWS::SNS::Topic")
    key = t["Resources"][topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]]
    sts = key["Properties"]["KeyPolicy"]["Statement"]
    for service in ("aps.amazonaws.com", "cloudwatch.amazonaws.com"):
        (st,) = [s for s in sts if s.get("Principal") == {"Service": service}]
        assert {"kms:GenerateDataKey", "kms:Decrypt"} <= set(st["Action"])
        assert st["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
        assert "123456789012" in json.dumps(st["Condition"]["ArnLike"])


def test_fsx_alarm_notifies_the_alert_topic(synthesized):
    t = synthesized.json
    topic_id, _ = one(t, "AWS::SNS::Topic")
    _, alarm = one(t, "AWS::CloudWatch::Alarm")
    p = alarm["Properties"]
    assert p["Namespace"] == "AWS/FSx" and p["MetricName"] == "FreeDataStorageCapacity"
    assert p["Dimensions"] == [{"Name": "FileSystemId", "Value": "fs-0123456789abcdef0"}]
    assert p["ComparisonOperator"] == "LessThanThreshold"
    assert p["Threshold"] == pytest.approx(4800 * 1024**3 * 0.1)
    assert p["AlarmActions"] == [{"Ref": topic_id}] and p["OKActions"] == [{"Ref": topic_id}]


# --- Grafana ----------------------------------------------------------------------------------------------


def test_grafana_workspace_signs_in_with_identity_center_and_reads_amp(synthesized):
    t = synthesized.json
    _, gf = one(t, "AWS::Grafana::Workspace")
    p = gf["Properties"]
    assert p["AuthenticationProviders"] == ["AWS_SSO"]
    assert p["AccountAccessType"] == "CURRENT_ACCOUNT"
    assert p["PermissionType"] == "CUSTOMER_MANAGED"
    assert p["DataSources"] == ["PROMETHEUS"]
    role_id = p["RoleArn"]["Fn::GetAtt"][0]
    trust = t["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
            "Effect": "Allow",
            "Principal": {"Service": "grafana.amazonaws.com"},
        }
    ]


def test_grafana_role_may_only_query_this_workspace(synthesized):
    t = synthesized.json
    ws_id, _ = one(t, "AWS::APS::Workspace")
    role_id = logical_id_of(t, "AWS::IAM::Role", "Grafana")
    policies = [p for p in of_type(t, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]]
    sts = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert sts == [
        {
            "Action": ["aps:GetLabels", "aps:GetMetricMetadata", "aps:GetSeries", "aps:QueryMetrics"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [ws_id, "Arn"]},
        }
    ]


def test_grafana_is_optional(synthesized):
    assert of_type(synthesized.plain_json, "AWS::Grafana::Workspace") == {}
    assert of_type(synthesized.plain_json, "AWS::IAM::Role") == {}
    assert synthesized.plain.grafana is None
    assert "GrafanaUrl" not in synthesized.plain_json["Outputs"]


# --- project rules ----------------------------------------------------------------------------------------


def _actions(st: Dict[str, Any]) -> List[str]:
    acts = st.get("Action", st.get("NotAction", []))
    return [acts] if isinstance(acts, str) else list(acts)


@pytest.mark.parametrize("which", ["json", "plain_json", "consumer_json"])
def test_no_policy_has_a_wildcard_action(synthesized, which):
    bad = [(lid, a) for lid, st in statements(getattr(synthesized, which)) for a in _actions(st) if "*" in a]
    assert not bad


def test_no_allow_statement_uses_not_action_or_a_wildcard_principal(synthesized):
    for lid, st in statements(synthesized.json):
        assert "NotAction" not in st, lid
        if st["Effect"] == "Allow":
            assert st.get("Principal") != "*" and st.get("Principal") != {"AWS": "*"}, lid


def test_keys_rotate_and_never_grant_kms_star(synthesized):
    keys = of_type(synthesized.json, "AWS::KMS::Key")
    assert len(keys) == 2
    for key in keys.values():
        assert key["Properties"]["EnableKeyRotation"] is True
        assert key["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("which", ["json", "plain_json", "consumer_json"])
def test_cfn_lint_is_clean(synthesized, which):
    from helpers.lint import cfn_lint

    assert cfn_lint(getattr(synthesized, which), "us-east-1") == []


def test_outputs(synthesized):
    outputs = synthesized.json["Outputs"]
    assert {"WorkspaceId", "RemoteWriteUrl", "QueryUrl", "AlertTopicArn", "GrafanaUrl"} <= set(outputs)
    ws_id, _ = one(synthesized.json, "AWS::APS::Workspace")
    assert outputs["RemoteWriteUrl"]["Value"] == {
        "Fn::Join": ["", [{"Fn::GetAtt": [ws_id, "PrometheusEndpoint"]}, "api/v1/remote_write"]]
    }


# --- public API ---------------------------------------------------------------------------------------------


def test_public_attributes(synthesized):
    from aws_cdk import Token
    from aws_cdk import aws_aps as aps
    from aws_cdk import aws_sns as sns

    s = synthesized.stack
    assert isinstance(s.workspace, aps.CfnWorkspace)
    assert isinstance(s.alert_topic, sns.Topic)
    for attr in ("workspace_arn", "workspace_id", "remote_write_url", "query_url"):
        assert Token.is_unresolved(getattr(s, attr)), attr
    assert s.stack_name == "obs-test-observability"


def _consumer_statements(synthesized, role) -> List[Dict[str, Any]]:
    t = synthesized.consumer_json
    role_id = synthesized.consumer.get_logical_id(role.node.default_child)
    pols = [p for p in of_type(t, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]]
    return [s for p in pols for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_grant_remote_write_is_one_action_on_one_workspace(synthesized):
    (st,) = _consumer_statements(synthesized, synthesized.writer)
    assert st["Action"] == "aps:RemoteWrite" and st["Effect"] == "Allow"
    assert "Fn::ImportValue" in st["Resource"], "another stack sees the workspace ARN as an export"


def test_grant_query_is_read_only_on_one_workspace(synthesized):
    (st,) = _consumer_statements(synthesized, synthesized.reader)
    assert st["Action"] == ["aps:GetLabels", "aps:GetMetricMetadata", "aps:GetSeries", "aps:QueryMetrics"]
    assert "Fn::ImportValue" in st["Resource"]

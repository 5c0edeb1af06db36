"""Every alarm can notify: each topic an alarm or the AMP alert manager publishes to admits that publisher in
its topic policy (an explicit topic policy replaces SNS's default one; a missing statement means the
notification is refused)."""

from __future__ import annotations

from typing import Any, Dict, List

from helpers import resources_of


def topic_statements(template: Dict[str, Any], topic_logical_id: str) -> List[Dict[str, Any]]:
    found = []
    for policy in resources_of(template, "AWS::SNS::TopicPolicy").values():
        if {"Ref": topic_logical_id} in policy["Properties"]["Topics"]:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def admits(statements: List[Dict[str, Any]], service: str) -> List[Dict[str, Any]]:
    out = []
    for st in statements:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        if st["Effect"] == "Allow" and st.get("Principal", {}).get("Service") == service and "sns:Publish" in actions:
            out.append(st)
    return out


def test_every_alarm_action_topic_admits_cloudwatch_for_this_accounts_alarms(synth_example):
    template = synth_example("default")["fm-dev-observability"]
    alarms = resources_of(template, "AWS::CloudWatch::Alarm")
    assert alarms, "the default example has the FSx free-capacity alarm"
    for name, alarm in alarms.items():
        for action in alarm["Properties"]["AlarmActions"]:
            ok = admits(topic_statements(template, action["Ref"]), "cloudwatch.amazonaws.com")
            assert ok, f"{name}: topic {action['Ref']} refuses CloudWatch"
            condition = ok[0]["Condition"]
            assert condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
            assert "alarm:*" in str(condition["ArnLike"]["aws:SourceArn"])


def test_the_alert_managers_topic_admits_the_workspace(synth_example):
    template = synth_example("default")["fm-dev-observability"]
    (topic,) = resources_of(template, "AWS::SNS::Topic")
    ok = admits(topic_statements(template, topic), "aps.amazonaws.com")
    assert ok and "ArnEquals" in ok[0]["Condition"]

"""`validate` refuses what synth or deploy would: AWS's tag rules, integers beyond what AWS takes, more node groups
than one template holds, numbers that are not whole, more alert addresses than the observability stack holds and more
lifecycle rules than S3 takes, or either twice; each with the field and the limit."""

from __future__ import annotations

import copy
from typing import Any, Dict, List

import pytest

from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError
from fmcluster.spec.node_group import MAX_NODE_GROUPS
from fmcluster.spec.observability import MAX_ALERT_EMAILS
from fmcluster.spec.storage import MAX_LIFECYCLE_RULES

BASE: Dict[str, Any] = {
    "name": "fm-dev",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}


def problems(**changes: Any) -> List[str]:
    data = copy.deepcopy(BASE)
    data.update(changes)
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    return e.value.problems


def group(**kw: Any) -> List[Dict[str, Any]]:
    return [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, **kw}]


@pytest.mark.parametrize(
    "tags, words",
    [
        ({"aws:team": "ml"}, "tags.aws:team: the prefix aws: is reserved"),
        ({"AWS:team": "ml"}, "tags.AWS:team: the prefix aws: is reserved"),
        ({"team": "a\x00b"}, "tags.team: the value holds characters AWS refuses"),
        ({"team": "${AWS::AccountId}"}, "tags.team: the value holds characters AWS refuses in tags (or ${...}"),
        ({"k" * 129: "v"}, "the key has 129 characters; AWS allows 1 to 128"),
        ({"team": "v" * 257}, "tags.team: the value has 257 characters; AWS allows at most 256"),
        ({f"k{i}": "v" for i in range(41)}, "tags: 41 tags; at most 40"),
        ({"fmcluster:cluster": "x"}, "tags.fmcluster:cluster: the prefix fmcluster: is fmcluster's own"),
        ({"team": "aws:ml"}, "tags.team: a value starting with aws: is reserved"),
    ],
)
def test_tags_follow_aws_rules(tags: Dict[str, str], words: str) -> None:
    assert any(words in line for line in problems(tags=tags)), problems(tags=tags)


def test_tags_aws_accepts_pass() -> None:
    spec = parse_spec({**BASE, "tags": {"team": "ml-infra", "cost center": "a+b=c.d_e:f/g@h", "empty": "",
                                        "équipe": "données"}})
    assert spec.tags["cost center"] == "a+b=c.d_e:f/g@h"


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"node_groups": group(count=True)}, "node_groups[0].count: true/yes is not a whole number"),
        ({"node_groups": group(count=2.0)}, "node_groups[0].count: 2.0 is not a whole number"),
        ({"node_groups": group(count="2")}, "node_groups[0].count: '2' is not a whole number"),
        ({"storage": {"data_bucket": {"lifecycle_rules": [{"expiration_days": 10**30}]}}},
         "storage.data_bucket.lifecycle_rules[0].expiration_days: 1000000000000000000000000000000 is out of range; "
         "at most 2147483647"),
        ({"storage": {"data_bucket": {"lifecycle_rules": [{"expiration_days": 1e30}]}}},
         "expiration_days: 1e+30 is not a whole number"),
        ({"storage": {"data_bucket": {"access_log_retention_days": 2**31}}},
         "storage.data_bucket.access_log_retention_days: 2147483648 is out of range"),
        ({"node_groups": group(capacity={"type": "on-demand", "size": 2**40})},
         "node_groups[0].capacity.size: 1099511627776 is out of range"),
        ({"node_groups": group(count=5000)}, "node_groups[0].count: 5000 is out of range: less than or equal to 2048"),
    ],
)
def test_numbers_are_whole_and_bounded(changes: Dict[str, Any], words: str) -> None:
    found = problems(**changes)
    assert any(words in line for line in found), found


def test_more_node_groups_than_one_template_holds_are_refused() -> None:
    groups = [{"name": f"g{i}", "instance_type": "p5.48xlarge", "count": 1} for i in range(MAX_NODE_GROUPS + 1)]
    [line] = problems(node_groups=groups)
    assert line.startswith(f"node_groups: {MAX_NODE_GROUPS + 1} groups; at most {MAX_NODE_GROUPS} (")
    assert "1 MB" in line and "200-output" in line
    parse_spec({**BASE, "node_groups": groups[:MAX_NODE_GROUPS]})


def emails(n: int) -> Dict[str, Any]:
    return {"alert_emails": [f"oncall-{i}@example.com" for i in range(n)]}


def rules(n: int) -> Dict[str, Any]:
    return {"data_bucket": {"lifecycle_rules": [{"prefix": f"run-{i}/", "expiration_days": 7} for i in range(n)]}}


def test_more_alert_addresses_than_the_observability_stack_holds_are_refused_with_the_quota() -> None:
    [line] = problems(observability=emails(600))
    assert line.startswith(f"observability.alert_emails: 600 addresses; at most {MAX_ALERT_EMAILS}: ")
    assert "500 resources per stack" in line
    assert len(parse_spec({**BASE, "observability": emails(MAX_ALERT_EMAILS)}).observability.alert_emails) == 100


def test_an_alert_address_given_twice_is_refused_at_its_entry() -> None:
    found = problems(observability={"alert_emails": ["a@example.com", "b@example.com", "A@Example.com"]})
    assert found == ["observability.alert_emails[2]: A@Example.com is entry 0 again (addresses compare without "
                     "case); each address is subscribed once"]


def test_more_lifecycle_rules_than_s3_takes_are_refused_with_the_limit() -> None:
    [line] = problems(storage=rules(1200))
    assert line.startswith("storage.data_bucket.lifecycle_rules: 1200 rules; S3 takes at most 1,000 ")
    assert len(parse_spec({**BASE, "storage": rules(MAX_LIFECYCLE_RULES)}).storage.data_bucket.lifecycle_rules) == 1000


def test_a_lifecycle_rule_given_twice_is_refused_at_its_entry() -> None:
    rule = {"prefix": "checkpoints/", "noncurrent_version_expiration_days": 14}
    found = problems(storage={"data_bucket": {"lifecycle_rules": [rule, {"prefix": "logs/", "expiration_days": 3},
                                                                  dict(rule)]}})
    assert found == ["storage.data_bucket.lifecycle_rules[2]: the same rule as entry 0; give each rule once"]

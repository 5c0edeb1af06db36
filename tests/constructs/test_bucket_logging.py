"""Every bucket a template creates records its S3 server access logs, except the buckets that receive them (a log
bucket logging into itself would loop): the committed templates of every example, read as CloudFormation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def buckets() -> Iterator[Tuple[str, str, Dict[str, Any], Dict[str, Any]]]:
    for path in sorted(TEMPLATES.rglob("*.template.json")):
        resources = json.loads(path.read_text()).get("Resources", {})
        for logical_id, resource in resources.items():
            if resource["Type"] == "AWS::S3::Bucket":
                yield str(path.relative_to(TEMPLATES)), logical_id, resource.get("Properties", {}), resources


def log_destinations(resources: Dict[str, Any]) -> set:
    return {r["Properties"]["LoggingConfiguration"]["DestinationBucketName"]["Ref"]
            for r in resources.values()
            if r["Type"] == "AWS::S3::Bucket" and "LoggingConfiguration" in r.get("Properties", {})}


def test_the_templates_create_buckets_at_all():
    assert len(list(buckets())) >= 10


@pytest.mark.parametrize("template,logical_id,props,resources",
                         list(buckets()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_bucket_logs_its_access_or_receives_access_logs(template, logical_id, props, resources):
    if logical_id in log_destinations(resources):
        assert "LoggingConfiguration" not in props
        return
    assert "LoggingConfiguration" in props, f"{template}: {logical_id} has no server access logging"
    assert props["LoggingConfiguration"]["DestinationBucketName"]["Ref"] in resources

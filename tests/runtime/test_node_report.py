"""The node report: what a node tells `fmcluster status` about the runtime it runs and its verdict."""

from __future__ import annotations

import json

import pytest

from fmcluster.runtime import node_report

DIGEST = "b" * 64
EC2_POINTER = {"schema": 1, "group": "h100", "runtime": {"key": f"runtime/{DIGEST}.zip", "sha256": DIGEST},
               "reports": {"url": "s3://runtime-bucket/node-reports/h100/", "region": "eu-west-1",
                           "pointer": "boot/groups/h100.json", "platform": "ec2"}}
# ParallelCluster's group object carries the runtime in its settings
PC_GROUP = {"schema": 1, "group": "gpu", "settings": {"runtime": {"sha256": DIGEST}},
            "reports": {"url": "s3://assets/fmcluster/node-reports/gpu/", "region": "us-east-1"}}


def asset_tag(root, value="i-0abc12345def67890\n"):
    tag = root / "sys/devices/virtual/dmi/id/board_asset_tag"
    tag.parent.mkdir(parents=True)
    tag.write_text(value)


def test_a_report_names_the_instance_group_runtime_and_verdict(tmp_path, capsys):
    asset_tag(tmp_path)
    (tmp_path / "pointer.json").write_text(json.dumps(EC2_POINTER))
    (tmp_path / "validation.json").write_text(json.dumps({"verdict": "fail", "failing": ["gpu.count"] * 30}))
    args = ["--pointer", str(tmp_path / "pointer.json"), "--validation", str(tmp_path / "validation.json"),
            "--out", str(tmp_path / "report.json"), "--root", str(tmp_path)]
    assert node_report.main(args) == 0
    assert capsys.readouterr().out.split() == ["s3://runtime-bucket/node-reports/h100/i-0abc12345def67890.json",
                                               "eu-west-1"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema"] == node_report.SCHEMA and report["instance_id"] == "i-0abc12345def67890"
    assert report["group"] == "h100" and report["runtime"] == DIGEST and report["verdict"] == "fail"
    assert len(report["failing"]) == node_report.MAX_FAILING and report["pointer"] == "boot/groups/h100.json"


def test_a_parallelcluster_group_object_names_its_runtime_in_its_settings():
    report = node_report.build(PC_GROUP, {"verdict": "pass"}, "i-0abc12345def67890", 0)
    assert report["runtime"] == DIGEST and report["time"] == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize("pointer, tag", [
    ({**EC2_POINTER, "reports": None}, "i-0abc12345def67890"),  # an earlier pointer: nowhere to report
    ({**EC2_POINTER, "reports": {"url": "https://elsewhere/", "region": "eu-west-1"}}, "i-0abc12345def67890"),
    ({**EC2_POINTER, "reports": {**EC2_POINTER["reports"], "region": "eu west"}}, "i-0abc12345def67890"),
    (EC2_POINTER, "Default string"),  # not a Nitro instance id
])
def test_nothing_is_reported_without_a_place_or_an_instance(tmp_path, pointer, tag):
    asset_tag(tmp_path, tag)
    (tmp_path / "pointer.json").write_text(json.dumps(pointer))
    args = ["--pointer", str(tmp_path / "pointer.json"), "--validation", str(tmp_path / "missing.json"),
            "--out", str(tmp_path / "report.json"), "--root", str(tmp_path)]
    assert node_report.main(args) == node_report.NOTHING
    assert not (tmp_path / "report.json").exists()

"""`fmcluster synth` ends with what a deploy will do: per stack its resources, what a delete leaves behind, the
deploy order and the next commands, read back from the cloud assembly it wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from fmcluster.cli import main
from fmcluster.cli.cdk_cli import CDK_CLI_VERSION
from fmcluster.cli.synth_summary import AssemblyUnreadable, render, stacks_of, summary
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "examples" / "default.yaml"


def assembly(tmp_path: Path, stacks: Dict[str, Dict[str, Any]]) -> Path:
    """A cloud assembly as aws-cdk-lib writes it: manifest.json artifacts plus one template per stack."""
    artifacts: Dict[str, Any] = {}
    for name, s in stacks.items():
        artifacts[f"{name}.assets"] = {"type": "cdk:asset-manifest", "properties": {"file": f"{name}.assets.json"}}
        artifacts[name] = {"type": "aws:cloudformation:stack", "environment": "aws://unknown-account/us-east-1",
                           "properties": {"templateFile": f"{name}.template.json",
                                          "terminationProtection": s.get("protected", False)},
                           "dependencies": s.get("after", []) + [f"{name}.assets"], "displayName": name}
        (tmp_path / f"{name}.template.json").write_text(json.dumps({"Resources": s["resources"]}))
    (tmp_path / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return tmp_path


def resources(*policies: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for i, (rtype, policy) in enumerate(policies):
        out[f"R{i}"] = {"Type": rtype, **({"DeletionPolicy": policy} if policy else {})}
    return out


def test_stacks_come_in_dependency_order_whatever_the_manifest_order(tmp_path):
    out = assembly(tmp_path, {
        "c-cluster": {"after": ["c-storage", "c-network"], "resources": resources(("AWS::EC2::LaunchTemplate", None))},
        "c-storage": {"after": ["c-network"], "protected": True, "resources": resources(
            ("AWS::FSx::FileSystem", "Retain"), ("AWS::S3::Bucket", "Retain"), ("AWS::IAM::Role", "Delete"))},
        "c-network": {"resources": resources(("AWS::EC2::VPC", None), ("AWS::EC2::Volume", "Snapshot"))},
    })
    stacks = stacks_of(out)
    assert [s["stack"] for s in stacks] == ["c-network", "c-storage", "c-cluster"]
    storage = stacks[1]
    assert storage["resources"] == 3 and storage["termination_protection"] and storage["depends_on"] == ["c-network"]
    assert [(k["type"], k["deletion_policy"]) for k in storage["retained"]] == [
        ("AWS::FSx::FileSystem", "Retain"), ("AWS::S3::Bucket", "Retain")]
    assert [k["deletion_policy"] for k in stacks[0]["retained"]] == ["Snapshot"]


def test_a_dependency_cycle_is_reported_not_looped_on(tmp_path):
    out = assembly(tmp_path, {"a": {"after": ["b"], "resources": {}}, "b": {"after": ["a"], "resources": {}}})
    with pytest.raises(AssemblyUnreadable, match="cycle"):
        stacks_of(out)


def test_a_missing_manifest_is_reported(tmp_path):
    with pytest.raises(AssemblyUnreadable, match="manifest.json"):
        stacks_of(tmp_path)


def synth(tmp_path: Path, capsys: Any, *extra: str) -> str:
    assert main(["synth", str(DEFAULT), "--out", str(tmp_path / "out"), *extra]) == 0
    return capsys.readouterr().out


def test_synth_json_and_text_summary_of_the_default_example(tmp_path, capsys):
    s = json.loads(synth(tmp_path, capsys, "--json"))  # stdout is the JSON alone
    out = tmp_path / "out"
    assert s["deploy_order"] == ["fm-dev-network", "fm-dev-storage", "fm-dev-observability", "fm-dev-cluster"]
    by_name = {st["stack"]: st for st in s["stacks"]}
    for name, st in by_name.items():
        template = json.loads((out / st["template"]).read_text())
        assert st["resources"] == len(template["Resources"]), name
    storage = by_name["fm-dev-storage"]
    assert storage["termination_protection"] and s["termination_protected"] == ["fm-dev-storage"]
    assert {"AWS::FSx::FileSystem", "AWS::S3::Bucket"} <= {k["type"] for k in storage["retained"]}
    # the pinned CDK CLI, whatever directory it is run from (npx cdk outside the clone fetches the newest)
    assert s["next_commands"] == [f"fmcluster preflight {DEFAULT}",
                                  f"npx --yes aws-cdk@{CDK_CLI_VERSION} deploy --app {out} --all",
                                  f"fmcluster status {DEFAULT}", f"fmcluster job nccl {DEFAULT} --out nccl-tests.sbatch"]
    assert s["way_in"][-1].startswith("aws ssm start-session --region us-east-1 --target $(aws ec2 describe-instances")
    assert [a["node_path"] for a in s["file_system"]["associations"]] == ["/fsx/datasets", "/fsx/checkpoints"]
    assert s["stores"] == [{"section": "storage.fsx", "title": "FSx for Lustre", "mount_point": "/fsx"}]

    text = render(summary(load_spec(DEFAULT), out, str(DEFAULT)))
    assert "deploy order: fm-dev-network -> fm-dev-storage -> fm-dev-observability -> fm-dev-cluster" in text
    assert f"fm-dev-storage: {storage['resources']} resources, after fm-dev-network, termination protection on" in text
    assert "1 AWS::FSx::FileSystem" in text and "/fsx/datasets <- s3://<fm-dev data bucket>/datasets/" in text
    assert "FSx for Lustre mounted at /fsx on every node (storage.fsx)" in text
    assert f"npx --yes aws-cdk@{CDK_CLI_VERSION} deploy --app {out} --all" in text
    assert "bills until you delete it" in text and "docs/teardown.md" in text
    assert "way in, after deploy (also the cluster stack's outputs):" in text




def test_an_unreadable_assembly_costs_the_summary_only_never_a_traceback(tmp_path, capsys):
    from fmcluster.cli.synth_summary import print_summary

    print_summary(load_spec(DEFAULT), tmp_path, str(DEFAULT), as_json=False)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("no summary:") and "manifest.json" in captured.err


def test_the_printed_cdk_cli_is_the_one_package_json_pins():
    import json as json_

    pinned = json_.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert CDK_CLI_VERSION == pinned, "package.json moved the CDK CLI: update fmcluster/cli/cdk_cli.py"


def test_every_store_the_spec_mounts_is_named_with_its_mount_point():
    s = {"stacks": [], "deploy_order": [], "nodes": [], "next_commands": [], "way_in": [], "termination_protected": [],
         "teardown": "docs/teardown.md",
         "file_system": {"mount_point": "/fsx", "associations": [
             {"node_path": "/fsx/datasets", "s3": "s3://b/datasets/", "auto_import": ["NEW"], "auto_export": []}]},
         "stores": [{"section": "storage.fsx", "title": "FSx for Lustre", "mount_point": "/fsx"},
                    {"section": "storage.mountpoint_s3", "title": "Mountpoint for Amazon S3", "mount_point": "/s3"}]}
    lines = render(s).splitlines()
    fsx = lines.index("FSx for Lustre mounted at /fsx on every node (storage.fsx)")
    assert lines[fsx + 1].startswith("  /fsx/datasets ") and lines[fsx + 2] == (
        "Mountpoint for Amazon S3 mounted at /s3 on every node (storage.mountpoint_s3)")


def test_the_teardown_line_says_what_each_store_says_of_its_kept_resources(tmp_path, monkeypatch):
    """A store's resource that outlives its stack and bills is named by the store (`Store.kept_bills`), whatever
    the store; a kept resource no store speaks of adds nothing."""
    from fmcluster import registry
    from fmcluster.platforms.storage import Store

    toy = Store(name="toy", title="Toy", spec_key="toy", resources="a toy",
                kept_bills=(("AWS::Toy::Volume", "the toy volume outlives its stack"),))
    monkeypatch.setattr(registry, "STORES", [*registry.STORES, toy])
    out = assembly(tmp_path, {"c-storage": {"resources": resources(("AWS::Toy::Volume", "Retain"),
                                                                   ("AWS::S3::Bucket", "Retain"))}})
    s = {"stacks": stacks_of(out), "deploy_order": ["c-storage"], "nodes": [], "stores": [], "file_system": None,
         "next_commands": [], "way_in": [], "termination_protected": [], "teardown": "docs/teardown.md"}
    assert render(s).splitlines()[-1] == "teardown: the toy volume outlives its stack; see docs/teardown.md"
    s["stacks"][0]["retained"] = [k for k in s["stacks"][0]["retained"] if k["type"] == "AWS::S3::Bucket"]
    assert "teardown:" not in render(s)


"""`fmcluster diff` on the command line: specs, template directories and git revisions in; text, Markdown or JSON
out; --fail-on gates CI with exit 1; bad input is exit 2 and one line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fmcluster.cli import main
from fmcluster.cli.diff_command import _spec_at_revision

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fsx_replaced(tmp_path_factory) -> Path:
    """The default example's templates with the file system's deployment type changed (replacement)."""
    out = tmp_path_factory.mktemp("new") / "templates"
    shutil.copytree(ROOT / "templates" / "default", out)
    storage = out / "fm-dev-storage.template.json"
    t = json.loads(storage.read_text())
    t["Resources"]["FileSystem"]["Properties"]["LustreConfiguration"]["DeploymentType"] = "PERSISTENT_1"
    storage.write_text(json.dumps(t))
    return out


def test_template_directories_in_text_out(capsys, fsx_replaced):
    assert main(["diff", str(ROOT / "templates" / "default"), str(fsx_replaced)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Data: stateful resources replaced or deleted") and "fm-dev-storage/FileSystem" in out


def test_fail_on_data_exits_1_and_says_why(capsys, fsx_replaced):
    assert main(["diff", str(ROOT / "templates" / "default"), str(fsx_replaced), "--fail-on", "data,nodes"]) == 1
    assert "data consequences present" in capsys.readouterr().err
    assert main(["diff", str(ROOT / "templates" / "default"), str(fsx_replaced), "--fail-on", "capacity"]) == 0


def test_markdown_for_a_pull_request_and_json_for_machines(capsys, fsx_replaced):
    assert main(["diff", str(ROOT / "templates" / "default"), str(fsx_replaced), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## fmcluster diff") and "**Attention: data" in md and "| fm-dev-storage |" in md
    assert main(["diff", str(ROOT / "templates" / "default"), str(fsx_replaced), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["classes"][0] == "data"
    replaced = {r["logical_id"] for r in report["stacks"]["fm-dev-storage"]["replaced"]}
    assert "FileSystem" in replaced


@pytest.mark.parametrize("argv, words", [
    (["diff", "missing.yaml", "other.yaml"], "no such file"),
    (["diff", "templates/default", "templates/default", "--fail-on", "everything"], "--fail-on everything: allowed"),
    (["diff", "templates/default"], "exactly one"),
    (["diff", "templates/default", "templates/default", "--git-rev", "HEAD"], "exactly one"),
    (["diff", "examples/default.yaml", "--deployed", "--timeout", "0"], "--timeout 0"),
    (["diff", "docs", "templates/default"], "without *.template.json"),
])
def test_bad_input_exits_2_with_one_line(capsys, monkeypatch, argv, words):
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


@pytest.fixture()
def spec_repo(tmp_path) -> Path:
    repo = tmp_path / "cluster"
    repo.mkdir()
    spec = repo / "cluster.yaml"
    spec.write_text((ROOT / "examples" / "default.yaml").read_text())

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=30)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "cluster.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "cluster")
    spec.write_text(spec.read_text().replace("throughput_per_tib: 250", "throughput_per_tib: 500"))
    return spec


def test_git_rev_reads_the_spec_as_it_was_committed(spec_repo):
    old = _spec_at_revision(str(spec_repo), "HEAD")
    assert old.storage.fsx.throughput_per_tib == 250


def test_an_unknown_revision_is_bad_input(spec_repo, capsys):
    assert main(["diff", str(spec_repo), "--git-rev", "no-such-rev"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fmcluster: --git-rev no-such-rev:") and len(err.strip().splitlines()) == 1


def test_git_rev_end_to_end_a_throughput_increase_is_safe(spec_repo, capsys):
    """Two real synthesis runs: the spec at HEAD and the working copy."""
    assert main(["diff", str(spec_repo), "--git-rev", "HEAD", "--json", "--fail-on", "data,nodes"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["classes"] == ["safe"]
    (change,) = report["stacks"]["fm-dev-storage"]["modified"]
    assert change["logical_id"] == "FileSystem" and change["paths"] == ["LustreConfiguration.PerUnitStorageThroughput"]


def test_a_spec_against_committed_templates_count_down_on_pcs(tmp_path, capsys):
    """One real synthesis: pcs-p5 with 2 instead of 4 nodes against its committed templates."""
    spec = tmp_path / "pcs-p5.yaml"
    spec.write_text((ROOT / "examples" / "pcs-p5.yaml").read_text().replace("count: 4", "count: 2"))
    assert main(["diff", str(ROOT / "templates" / "pcs-p5"), str(spec), "--json", "--fail-on", "nodes"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert "nodes" in report["classes"] and "data" not in report["classes"]
    assert report["gpus_affected"] == 16


def test_the_ci_example_posts_markdown_and_fails_on_data_loss():
    import yaml

    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "diff.yml").read_text())
    steps = workflow["jobs"]["diff"]["steps"]
    script = "\n".join(s.get("run", "") for s in steps)
    assert "fmcluster synth" in script and "--out out/base" in script and "--out out/head" in script
    assert "fmcluster diff out/base out/head --markdown --fail-on data" in script
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert any(s.get("uses", "").startswith("actions/github-script") for s in steps)


def test_switching_eks_to_launch_templates_only_keeps_the_network_and_storage(tmp_path, capsys):
    """One real synthesis: eks-p5 with the orchestrator switched, against eks-p5's committed templates."""
    import re

    text = (ROOT / "examples" / "eks-p5.yaml").read_text()
    text = re.sub(r"orchestrator:\n(  .*\n)+", "orchestrator:\n  type: none\n", text).replace("policy: taint", "policy: fail")
    text = re.sub(r"\n +(min|max)_count: .*", "", text)  # launch templates only: no scaler, no range
    spec = tmp_path / "eks-p5.yaml"
    spec.write_text(text)
    assert main(["diff", str(ROOT / "templates" / "eks-p5"), str(spec), "--json", "--fail-on", "nodes"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["classes"][:3] == ["data", "nodes", "control-plane"]
    assert report["gpus_affected"] == 32
    findings = report["findings"]
    # the network and storage stacks are the same under every orchestrator: no subnet, no export, no order to follow
    assert not [f for f in findings if f["where"].startswith(("eks-p5-network", "eks-p5-storage"))]
    assert not [f for f in findings if " export " in f["where"]]
    assert any(f["text"] == "AWS::EKS::Cluster removed" for f in findings)
    # the control plane's KMS keys are retained, not lost; the node runtime bucket is CDK-emptied artifacts
    data = [f for f in findings if f["class"] == "data"]
    assert data and all("DeletionPolicy Retain" in f["text"] for f in data)
    assert any("autoDeleteObjects" in f["text"] for f in findings if f["class"] == "safe")

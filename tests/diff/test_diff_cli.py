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
    (["diff", "templates/default", "templates/default", "--fail-on", ""], "--fail-on : allowed"),
    (["diff", "templates/default", "templates/default", "--region", "Moon-1"], "--region Moon-1"),
    (["diff", "examples/default.yaml", "--git-rev", "HEAD", "--region", "us-west-2"], "only with OLD NEW"),
    (["diff", "examples/default.yaml", "--deployed", "--timeout", "nan"], "--timeout nan"),
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


def test_git_rev_end_to_end_a_throughput_increase_takes_the_file_system_away_but_loses_nothing(spec_repo, capsys):
    """Two real synthesis runs: the spec at HEAD and the working copy. FSx replaces its file servers: no data or node
    is lost, but the file system is unavailable for a while, which a reviewer schedules (control-plane)."""
    assert main(["diff", str(spec_repo), "--git-rev", "HEAD", "--json", "--fail-on", "data,nodes"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["classes"] == ["control-plane"] and not report["deploy_fails"]
    assert "plan for an hour without I/O" in report["findings"][0]["text"]
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


def test_the_ci_example_is_pinned_fork_safe_and_gates_every_class():
    import re

    import yaml

    text = (ROOT / "examples" / "ci" / "diff.yml").read_text()
    workflow = yaml.safe_load(text)
    steps = workflow["jobs"]["diff"]["steps"]
    script = "\n".join(s.get("run", "") for s in steps)
    assert "fmcluster synth" in script and "--out out/base" in script and "--out out/head" in script
    assert "--fail-on data,nodes,control-plane,capacity" in script
    # a pull request from a fork gets a read-only token: nothing is posted, the report goes to the summary and an
    # artifact
    assert workflow["permissions"] == {"contents": "read"}
    assert "GITHUB_STEP_SUMMARY" in script and not any("github-script" in s.get("uses", "") for s in steps)
    uses = [s["uses"] for s in steps if "uses" in s]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert all(re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", u) for u in uses), uses  # pinned by commit
    node = next(s for s in steps if s.get("uses", "").startswith("actions/setup-node@"))
    assert int(node["with"]["node-version"]) >= 22  # Node.js 20 is past its end of life


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


@pytest.mark.parametrize("breakage, words", [
    (lambda t: [t], "not a JSON object"),
    (lambda t: {**t, "Resources": []}, "Resources is not an object"),
    (lambda t: {**t, "Resources": {"X": {"Properties": {}}}}, "resource X is not an object with a Type"),
    (lambda t: {**t, "Resources": {"X": {"Type": "AWS::S3::Bucket", "Properties": "?"}}}, "Properties is not an object"),
    (lambda t: {**t, "Outputs": {"O": {"Value": 1, "Export": "name"}}}, "output O is not an object"),
])
def test_a_malformed_template_folder_is_bad_input_not_a_traceback(tmp_path, capsys, breakage, words):
    folder = tmp_path / "broken"
    shutil.copytree(ROOT / "templates" / "default", folder)
    storage = folder / "fm-dev-storage.template.json"
    storage.write_text(json.dumps(breakage(json.loads(storage.read_text()))))
    assert main(["diff", str(ROOT / "templates" / "default"), str(folder)]) == 2
    err = capsys.readouterr().err
    assert words in err and "fm-dev-storage.template.json" in err and "Traceback" not in err


def test_a_template_that_is_not_json_is_bad_input(tmp_path, capsys):
    folder = tmp_path / "broken"
    shutil.copytree(ROOT / "templates" / "default", folder)
    (folder / "fm-dev-storage.template.json").write_bytes(b"\xff{")
    assert main(["diff", str(folder), str(ROOT / "templates" / "default")]) == 2
    assert "cannot read a template" in capsys.readouterr().err


def test_a_missing_new_spec_is_refused_before_the_old_one_is_synthesized(tmp_path, capsys, monkeypatch):
    from fmcluster.cli import diff_command

    def synthesize(spec):
        raise AssertionError("synthesized before every input was checked")

    monkeypatch.setattr(diff_command, "_synthesize", synthesize)
    assert main(["diff", str(ROOT / "examples" / "default.yaml"), str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_folders_are_judged_with_their_own_regions_schemas(tmp_path, capsys, monkeypatch):
    """A cloud assembly names its region (manifest.json); committed templates name it through their subnets' zones;
    --region overrides both."""
    from fmcluster.diff import consequences

    seen = []
    real = consequences.compare

    def spy(old, new, *, region="us-east-1", decided=None):
        seen.append(region)
        return real(old, new, region=region, decided=decided)

    monkeypatch.setattr("fmcluster.diff.compare", spy)
    b200 = ROOT / "templates" / "eks-p6-b200-capacity-block"  # us-east-2
    assert main(["diff", str(b200), str(b200), "--json"]) == 0
    assembly = tmp_path / "cdk.out"
    shutil.copytree(b200, assembly)
    (assembly / "manifest.json").write_text(json.dumps({"artifacts": {
        "eks-b200-cluster": {"type": "aws:cloudformation:stack", "environment": "aws://unknown-account/eu-north-1"}}}))
    assert main(["diff", str(assembly), str(assembly), "--json"]) == 0
    assert main(["diff", str(assembly), str(assembly), "--json", "--region", "ap-south-1"]) == 0
    assert seen == ["us-east-2", "eu-north-1", "ap-south-1"]


def test_without_parallelclusters_checker_a_parallelcluster_change_is_unverified_not_safe(monkeypatch):
    """A check that could not run is not a pass."""
    from fmcluster.diff import compare, pcluster
    from fmcluster.diff.findings import CONTROL_PLANE

    def unavailable(base, target, name):
        raise pcluster.CheckerUnavailable("ParallelCluster is not installed here")

    monkeypatch.setattr(pcluster, "RUNNER", [unavailable])
    old = {p.name[:-14]: json.loads(p.read_text()) for p in (ROOT / "templates" / "parallelcluster-p5").glob("*.json")}
    new = json.loads(json.dumps(old))
    cluster = next(r for r in new["pc-p5-cluster"]["Resources"].values() if r["Type"] == "Custom::PclusterCluster")
    cluster["Properties"]["ClusterConfiguration"]["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["MaxCount"] = 8
    report = compare(old, new)
    (finding,) = [f for f in report.findings if "update checker could not run" in f.text]
    assert finding.cls == CONTROL_PLANE and "pcluster update-cluster --dryrun" in finding.text


def test_the_checker_runs_in_parallelclusters_own_interpreter(monkeypatch):
    """The product's path, without the test workers' long-lived checker: one process, bounded, its JSON read."""
    from fmcluster.diff import pcluster
    from fmcluster.diff.pcluster import configuration, run_checker, with_placeholders

    template = json.loads((ROOT / "templates" / "parallelcluster-p5" / "pc-p5-cluster.template.json").read_text())
    resource = next(r for r in template["Resources"].values() if r["Type"] == "Custom::PclusterCluster")
    base = with_placeholders(configuration(resource), distinct=True)
    target = json.loads(json.dumps(base))
    target["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["InstanceType"] = "p5en.48xlarge"
    rc, answer = run_checker(base, target, "pc-p5")
    assert rc == 1 and answer["allowed"] is False
    assert [c["policy"] for c in answer["changes"] if c["parameter"] == "InstanceType"] == ["COMPUTE_FLEET_STOP"]
    monkeypatch.setenv(pcluster.PYTHON_ENV, "/nonexistent/python")
    with pytest.raises(pcluster.CheckerUnavailable, match="not installed"):
        run_checker(base, target, "pc-p5")


def test_a_spec_against_its_own_committed_templates_is_no_change(capsys):
    """diff synthesizes without cdk-nag's checks (they read templates, never change them): the default example
    against its committed templates, which `make templates` writes with cdk-nag on, is no change at all."""
    assert main(["diff", str(ROOT / "templates" / "default"), str(ROOT / "examples" / "default.yaml"),
                 "--fail-on", "data,nodes,control-plane,capacity,safe"]) == 0
    assert capsys.readouterr().out == "no changes\n"

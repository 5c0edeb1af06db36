"""Quality gates on every example: cfn-lint clean in the example's region, cdk-nag at every
synth, least privilege without wildcard actions, nothing open to the internet, templates/
current."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import actions_of, policy_statements, resources_of

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def every_example(synth_example, example_names):
    return synth_example.all(example_names)


@pytest.mark.parametrize("example", sorted(p.stem for p in (ROOT / "examples").glob("*.yaml")))
def test_cfn_lint_reports_nothing(example):
    """Every template of the example, in its example's region (scripts/cfn_lint_templates.py on templates/, which
    test_templates_dir_is_current holds equal to what the examples synthesize)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from cfn_lint_templates import findings

    assert findings([example]) == []


def test_cfn_lint_with_its_shared_rule_set_still_reports_faults_in_every_template_it_is_given():
    """The rule set is built once per worker and reused: a clean template in between does not hide the next fault."""
    from helpers.lint import cfn_lint

    bad = {"Resources": {"Data": {"Type": "AWS::S3::Bucket", "Properties": {"BucketNme": "training-data"}}}}
    good = {"Resources": {"Data": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "training-data"}}}}
    assert [f.split()[0] for f in cfn_lint(bad, "us-east-1")] == ["E3002"]
    assert cfn_lint(good, "us-east-1") == []
    assert [f.split()[0] for f in cfn_lint(bad, "eu-west-1")] == ["E3002"]


def test_no_wildcard_actions_anywhere(every_example):
    for name, stacks in every_example.items():
        for stack, template in stacks.items():
            for st in policy_statements(template):
                if st.get("Effect") == "Deny":
                    # the TLS-only bucket policy denies s3:* without TLS; a broad Deny grants nothing
                    assert st.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}, st
                    continue
                for action in actions_of(st):
                    assert "*" not in action, f"{name}/{stack}: wildcard action {action}"


def test_nothing_accepts_traffic_from_the_internet(every_example):
    for stacks in every_example.values():
        for template in stacks.values():
            for sg in resources_of(template, "AWS::EC2::SecurityGroup").values():
                for rule in sg["Properties"].get("SecurityGroupIngress", []):
                    assert rule.get("CidrIp") != "0.0.0.0/0" and rule.get("CidrIpv6") != "::/0"
            for rule in resources_of(template, "AWS::EC2::SecurityGroupIngress").values():
                assert rule["Properties"].get("CidrIp") != "0.0.0.0/0"


def test_every_kms_key_rotates_and_is_retained(every_example):
    for stacks in every_example.values():
        for template in stacks.values():
            for key in resources_of(template, "AWS::KMS::Key").values():
                assert key["Properties"]["EnableKeyRotation"] is True
                assert key["DeletionPolicy"] == "Retain" and key["UpdateReplacePolicy"] == "Retain"


def test_cdk_nag_fails_synthesis_on_an_unacknowledged_finding(tmp_path):
    """The gate is real: an unencrypted, unlogged bucket in a cluster stack stops synth."""
    from aws_cdk import aws_s3 as s3

    from fmcluster.app import build_stacks

    stacks = build_stacks(ROOT / "examples" / "default.yaml", outdir=str(tmp_path))
    s3.Bucket(stacks.network, "Careless")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        stacks.app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in report["pluginReports"] for v in p["violations"]}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def test_templates_dir_is_current(every_example):
    sys.path.insert(0, str(ROOT / "scripts"))
    from templates import expected_files, stale

    diff = stale(expected_files(every_example))
    assert not diff, f"templates/ is stale, run `make templates`: {diff}"


@pytest.mark.parametrize(
    "tool, args",
    [
        ("ruff", ["check", "fmcluster", "tests", "bench", "scripts", "app.py"]),
        ("mypy", ["fmcluster", "app.py"]),
    ],
)
def test_code_is_lint_and_type_clean(tool, args):
    exe = shutil.which(tool, path=str(Path(sys.executable).parent))
    assert exe, f"{tool} is not installed in the venv: run make setup"
    r = subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


@pytest.mark.long
def test_cdk_cli_synth_matches_fmcluster_synth(tmp_path, synth_example):
    """`make synth` (the CDK CLI running app.py) and `fmcluster synth` write the same templates."""
    import os

    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    assert cdk.exists(), "node_modules missing: run make setup"
    env = dict(os.environ, CDK_HOME=str(tmp_path / ".cdk"), CDK_DISABLE_VERSION_CHECK="1",
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    r = subprocess.run([str(cdk), "synth", "--quiet", "--no-version-reporting", "--no-path-metadata", "--no-asset-metadata",
                        "-c", "config=examples/default.yaml", "--output", str(tmp_path / "out")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    # a newcomer's first synth is quiet: reference strength and every feature flag decided (fmcluster/feature_flags.py)
    assert "WARNING" not in r.stderr and "feature flags are not configured" not in r.stdout + r.stderr, r.stderr
    for stack, template in synth_example("default").items():
        cli = json.loads((tmp_path / "out" / f"{stack}.template.json").read_text())
        assert cli == template, f"{stack} differs between cdk synth and fmcluster synth"


def test_every_log_group_is_encrypted_with_a_customer_managed_key(every_example):
    for name, stacks in every_example.items():
        for stack, template in stacks.items():
            for lid, group in resources_of(template, "AWS::Logs::LogGroup").items():
                assert "KmsKeyId" in group["Properties"], f"{name}/{stack}: {lid} is not KMS-encrypted"


def test_tests_build_apps_through_the_context_build_app_uses():
    """A bare `cdk.App()` in a test would synthesize without fmcluster's feature flags and offline context, so it
    could pass where `make synth` fails."""
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
                 if re.search(r"\b(cdk\.)?App\(\s*\)", p.read_text()) and p.name != "test_quality.py"]
    assert offenders == []


@pytest.mark.parametrize("script", sorted(str(p.relative_to(ROOT)) for p in [*(ROOT / "fmcluster").rglob("*.sh"),
                                                                              *(ROOT / "scripts").rglob("*.sh")]))
def test_every_shell_script_parses_and_is_shellcheck_clean(script):
    """The node-side scripts (bootstrap, HyperPod lifecycle, collectors' installer, ParallelCluster's custom action)
    and the repository's own."""
    assert subprocess.run(["bash", "-n", str(ROOT / script)]).returncode == 0
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    # -x from the script's folder: the HyperPod lifecycle scripts source their common.sh
    r = subprocess.run([shellcheck, "-x", str(ROOT / script)], capture_output=True, text=True,
                       cwd=(ROOT / script).parent)
    assert r.returncode == 0, r.stdout


def test_comments_and_docs_cite_no_internal_issue_numbers():
    """A reader outside the project cannot open the project's own issue numbers or reviews: code, tests and docs cite
    public sources (an upstream tracker issue names its repository, owner/name) or say why."""
    pattern = re.compile(r"\b(?:[Ii]ssue|[Rr]eview of) #?\d+")
    found = []
    for path in [*(ROOT / "fmcluster").rglob("*"), *(ROOT / "tests").rglob("*"), *(ROOT / "docs").rglob("*"),
                 *(ROOT / "scripts").rglob("*"), *(ROOT / "bench").rglob("*"), *(ROOT / "examples").rglob("*"),
                 ROOT / "README.md"]:
        if not path.is_file() or path.suffix not in (".py", ".md", ".sh", ".yaml", ".yml", ".csv", ".json"):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for m in pattern.finditer(line):
                if "/" not in line[: m.start()] and path != Path(__file__):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert found == []

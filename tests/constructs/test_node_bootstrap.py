"""The shared node bootstrap: clean shell, and each validation policy does what it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "fmcluster" / "runtime" / "node_bootstrap.sh"


def run_bootstrap(tmp_path: Path, *, healthy: bool, policy: str, agent: Optional[str] = None,
                  report: Optional[str] = None, aws: Optional[str] = None,
                  **env_extra: str) -> subprocess.CompletedProcess:
    """Run the script with a fake python3 standing in for the validator (printing `report`, default a verdict)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    # the contract module and `python3 -c` (the publish step's JSON check) answer for real (standard library only,
    # so -S: no site-packages, as on a node); everything else is the fake validator
    text = report if report is not None else json.dumps({"verdict": "pass" if healthy else "fail"})
    (tmp_path / "report.txt").write_text(text)
    fake.write_text(f"#!/bin/sh\ncase \"$*\" in *fmcluster.runtime.contract*|*fmcluster.runtime.node_report*|-c*) "
                    f"PYTHONPATH={ROOT} exec {sys.executable} -S \"$@\";; esac\n"
                    f"echo \"$@\" >> {tmp_path}/validator-args.log\n"
                    f"cat {tmp_path}/report.txt\nexit {0 if healthy else 1}\n")
    fake.chmod(0o755)
    if aws is not None:
        (bin_dir / "aws").write_text(aws)
        (bin_dir / "aws").chmod(0o755)
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/systemctl.log\n")
    systemctl.chmod(0o755)
    (tmp_path / "profile.json").write_text(json.dumps({"instance_type": "p5.48xlarge", "orchestrator": agent}))
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", FMCLUSTER_POLICY=policy,
               FMCLUSTER_LOG_DIR=str(tmp_path / "log"), FMCLUSTER_TEXTFILE_DIR=str(tmp_path / "textfile"),
               FMCLUSTER_SYSTEMD_DIR=str(tmp_path), FMCLUSTER_PROFILE=str(tmp_path / "profile.json"),
               FMCLUSTER_STATE_DIR=str(tmp_path / "state"))
    env.update({"FMCLUSTER_POINTER": str(tmp_path / "no-pointer.json"), **env_extra})
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("policy", ["fail", "drain", "taint", "report"])
def test_healthy_node_passes_under_every_policy(tmp_path, policy):
    assert run_bootstrap(tmp_path, healthy=True, policy=policy).returncode == 0
    assert "node validation passed" in (tmp_path / "log" / "bootstrap.log").read_text()


def test_fail_policy_stops_provisioning(tmp_path):
    assert run_bootstrap(tmp_path, healthy=False, policy="fail").returncode == 1
    assert (tmp_path / "log" / "validate.json").read_text().strip() == '{"verdict": "fail"}'


def test_report_policy_only_reports(tmp_path):
    assert run_bootstrap(tmp_path, healthy=False, policy="report").returncode == 0
    assert not (tmp_path / "fmcluster-validate.service").exists()


def test_drain_waits_for_slurmd_then_drains(tmp_path):
    assert run_bootstrap(tmp_path, healthy=False, policy="drain", agent="slurm").returncode == 0
    unit = (tmp_path / "fmcluster-validate.service").read_text()
    assert "After=slurmd.service" in unit and "--policy drain" in unit
    assert "fmcluster_node_validation.prom" in unit
    assert "enable fmcluster-validate.service" in (tmp_path / "systemctl.log").read_text()


def test_boot_run_skips_the_agent_check_until_the_agent_runs(tmp_path):
    """slurmd/kubelet start after the boot script: checking them then would fail every node."""
    assert run_bootstrap(tmp_path, healthy=True, policy="fail", agent="slurm").returncode == 0
    assert "--skip orch.agent" in (tmp_path / "validator-args.log").read_text()


def test_without_an_agent_nothing_is_skipped(tmp_path):
    assert run_bootstrap(tmp_path, healthy=True, policy="report").returncode == 0
    assert "--skip" not in (tmp_path / "validator-args.log").read_text()


@pytest.mark.parametrize("healthy", [True, False])
def test_the_report_is_published_whole_for_a_gate(tmp_path, healthy):
    """The node gate (platforms/kubernetes/node/kube_gate.py) reads state/validation.json: the report as written."""
    assert run_bootstrap(tmp_path, healthy=healthy, policy="report").returncode == 0
    published = json.loads((tmp_path / "state" / "validation.json").read_text())
    assert published == {"verdict": "pass" if healthy else "fail"}
    assert not list((tmp_path / "state").glob(".*.tmp")), "the temporary file is renamed into place"


def test_a_validator_without_a_report_is_published_as_a_failure(tmp_path):
    """A crashed or timed-out validator leaves no JSON; a gate must not wait for a result that never comes."""
    assert run_bootstrap(tmp_path, healthy=False, policy="report", report="Traceback (most recent call last)").returncode == 0
    published = json.loads((tmp_path / "state" / "validation.json").read_text())
    assert published["verdict"] == "fail" and published["failing"] == ["validator"]
    assert "exited 1" in published["error"]


def test_values_reach_the_shell_as_single_words_whatever_they_hold():
    """Every value the user data interpolates is shell-quoted: a value with spaces, quotes or `;` stays one argument
    (the spec's patterns refuse such names today; the quoting does not rely on them)."""
    import shlex

    from fmcluster.constructs.node_bootstrap import collectors_step
    from fmcluster.platforms.storage.fsx_lustre.mount import boot_command

    odd = "x'; touch /tmp/pwned; echo \"$(id)\""
    words = shlex.split(collectors_step(cluster=odd, region="us-east-1", remote_write_url=odd, node_group=odd,
                                        gpu=True).split("||")[0])
    assert words[words.index("--cluster") + 1] == odd and words[words.index("--node-group") + 1] == odd
    assert words[words.index("--remote-write-url") + 1] == odd
    words = shlex.split(boot_command(dns_name=odd, mount_name=odd, mount_point="/fsx data", efa=False))
    assert words[words.index("--dns-name") + 1] == odd and words[words.index("--mount-point") + 1] == "/fsx data"


def test_the_node_reports_its_runtime_and_verdict_where_its_pointer_says(tmp_path):
    """For `fmcluster status`: the instance (from the Nitro asset tag), the group, the runtime its pointer named and
    the verdict, put under the group's node-reports/ prefix; the boot's outcome does not depend on it."""
    digest = "a" * 64
    pointer = {"schema": 1, "group": "h100", "runtime": {"key": f"runtime/{digest}.zip", "sha256": digest},
               "reports": {"url": "s3://runtime-bucket/node-reports/h100/", "region": "us-west-2",
                           "pointer": "boot/groups/h100.json", "platform": "ec2"}}
    (tmp_path / "boot.json").write_text(json.dumps(pointer))
    tag = tmp_path / "root" / "sys" / "devices" / "virtual" / "dmi" / "id" / "board_asset_tag"
    tag.parent.mkdir(parents=True)
    tag.write_text("i-0123456789abcdef0\n")
    aws = f"#!/bin/sh\necho \"$@\" >> {tmp_path}/aws.log\ncp \"$6\" {tmp_path}/uploaded.json\n"
    r = run_bootstrap(tmp_path, healthy=False, policy="report", aws=aws, FMCLUSTER_POINTER=str(tmp_path / "boot.json"),
                      FMCLUSTER_ROOT=str(tmp_path / "root"))
    assert r.returncode == 0
    (call,) = (tmp_path / "aws.log").read_text().splitlines()
    assert call.endswith("--region us-west-2 " + f"{tmp_path}/state/node-report.json "
                         "s3://runtime-bucket/node-reports/h100/i-0123456789abcdef0.json")
    report = json.loads((tmp_path / "uploaded.json").read_text())
    assert report["instance_id"] == "i-0123456789abcdef0" and report["runtime"] == digest
    assert report["verdict"] == "fail" and report["pointer"] == "boot/groups/h100.json"


def test_a_node_without_a_pointer_sends_no_report(tmp_path):
    assert run_bootstrap(tmp_path, healthy=True, policy="report").returncode == 0
    assert not (tmp_path / "state" / "node-report.json").exists()

"""Slurm's periodic health check on a fixture node with a stand-in scontrol: a fault that appears during a node's
life drains it with the failing checks; what a busy node shows (application Xids, a job running) drains nothing; a
node it drained for a non-hardware check comes back once it passes; an operator's drain and a hardware drain stay;
the program slurmd runs always exits 0 and prints a bounded summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest

from fmcluster.runtime import health_check
from fmcluster.runtime.checks import all_checks

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/bin:/bin"
FixtureNode = Any  # tests/runtime/conftest.py: a healthy node tree to break
NODE = "compute-1"
# `scontrol show node` as Slurm prints it: State on an indented line, Reason on its own line with [user@time].
SHOW = "NodeName={node} Arch=x86_64 CoresPerSocket=48\\n   State={state} ThreadsPerCore=2\\n{reason}"


def fake_scontrol(node: FixtureNode, state: str = "IDLE", reason: str = "") -> Path:
    """scontrol that prints the node in `state` (with `reason`) and records every call."""
    calls = node.base / "scontrol.calls"
    line = f"   Reason={reason} [root@2026-12-02T01:00:00]\\n" if reason else ""
    node.tool("scontrol", f'echo "$*" >> {calls}\n'
                          f'[ "$1" = show ] && printf "{SHOW.format(node=NODE, state=state, reason=line)}"\n'
                          "exit 0\n")
    return calls


def check(node: FixtureNode, *extra: str, policy: str = "drain", cli: bool = False) -> dict:
    """The health check's summary: health_check.main in this process, or (cli) `python -m` as slurmd's program
    starts it, both with the node's tools on PATH and nothing else in the environment."""
    argv = ["run", "--profile", str(node.profile(policy=policy)), "--root", str(node.root), "--node-name", NODE,
            *extra]
    if cli:
        proc = subprocess.run([sys.executable, "-m", "fmcluster.runtime.health_check", *argv],
                              capture_output=True, text=True, timeout=60,
                              env={"PATH": f"{node.bin}:{SYSTEM_PATH}", "PYTHONPATH": str(REPO),
                                   "HOME": str(node.base)})
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    else:
        rc, stdout, stderr = node.call(health_check.main, argv)
    assert rc == 0, stderr
    return json.loads(stdout)


def updates(calls: Path) -> List[str]:
    return [c for c in calls.read_text().splitlines() if c.startswith("update")] if calls.exists() else []


def xid(node: FixtureNode, code: int, text: str) -> None:
    node.append("/dev/kmsg", f"4,2001,99000000,-;NVRM: Xid (PCI:0000:53:00): {code}, pid=4242, {text}\n")


def test_a_gpu_that_fell_off_the_bus_drains_a_busy_node_with_the_failing_check(p5):
    calls = fake_scontrol(p5, state="ALLOCATED")
    xid(p5, 79, "GPU has fallen off the bus.")
    out = check(p5, cli=True)
    assert out["failed"] == ["hw.xid"] and out["action"] == "drain" and out["result"] == "done"
    assert updates(calls) == [f"update nodename={NODE} state=drain reason=fmcluster health: hw.xid"]


def test_what_a_busy_node_shows_drains_nothing(p5):
    """Application Xids (a job's own fault) and a running job are no reason to take the node."""
    calls = fake_scontrol(p5, state="MIXED")
    xid(p5, 13, "Graphics Engine Exception")
    xid(p5, 31, "MMU Fault: ENGINE GRAPHICS")
    out = check(p5)
    assert out == {**out, "failed": [], "errored": [], "action": "none"}
    assert updates(calls) == []


def test_a_healthy_node_is_left_alone(p5):
    calls = fake_scontrol(p5)
    assert check(p5)["action"] == "none"
    assert updates(calls) == []


def test_a_node_it_drained_for_a_lost_mount_returns_once_it_passes(p5):
    calls = fake_scontrol(p5, state="IDLE+DRAIN", reason="fmcluster health: storage.mounts")
    assert check(p5)["action"] == "resume"
    assert updates(calls) == [f"update nodename={NODE} state=resume"]


def test_report_policy_never_resumes_nor_drains(p5):
    calls = fake_scontrol(p5, state="IDLE+DRAIN", reason="fmcluster health: storage.mounts")
    assert check(p5, policy="report")["action"] == "none"
    xid(p5, 79, "GPU has fallen off the bus.")
    assert check(p5, policy="report")["why"] == "policy report: reported only"
    assert updates(calls) == []


def test_under_fail_a_failing_node_drains_for_replacement_and_is_never_resumed(p5):
    """ParallelCluster's default: clustermgtd replaces a drained static node once it is idle."""
    calls = fake_scontrol(p5, state="IDLE+DRAIN", reason="fmcluster health: storage.mounts")
    assert check(p5, policy="fail")["action"] == "none"
    xid(p5, 48, "DBE (double bit error) ECC error")
    assert check(p5, policy="fail")["action"] == "drain"
    assert updates(calls) == [f"update nodename={NODE} state=drain reason=fmcluster health: hw.xid,storage.mounts"]


@pytest.mark.parametrize("state, reason", [
    ("IDLE+DRAIN", "fmcluster health: hw.xid"),   # a hardware drain: the kernel log may have scrolled away
    ("IDLE+DRAIN", "bad DIMM, ticket 42"),         # an operator's
    ("DOWN", "Not responding"),                     # the controller's
])
def test_a_passing_node_held_out_for_another_reason_stays_out(p5, state, reason):
    calls = fake_scontrol(p5, state=state, reason=reason)
    assert check(p5)["action"] == "none"
    assert updates(calls) == []


def test_an_operators_drain_keeps_its_reason_when_a_check_fails(p5):
    calls = fake_scontrol(p5, state="IDLE+DRAIN", reason="firmware update")
    xid(p5, 79, "GPU has fallen off the bus.")
    assert check(p5)["why"].startswith("already out of service")
    assert updates(calls) == []


def test_checks_that_could_not_run_change_nothing():
    assert health_check.decide("drain", True, [], ["storage.mounts"], {"IDLE", "DRAIN"},
                               "fmcluster health: storage.mounts") == (
        "none", "some checks could not be judged; nothing changes", [])


def test_a_later_drain_keeps_the_hardware_fault_an_earlier_one_named(p5):
    """The Xid may have scrolled out of the kernel log; the reason still holds the node for it."""
    calls = fake_scontrol(p5, state="IDLE+DRAIN", reason="fmcluster health: hw.xid")
    mounts = (p5.root / "proc" / "mounts").read_text().splitlines(keepends=True)
    p5.write("/proc/mounts", "".join(m for m in mounts if " lustre " not in m))  # the shared file system went too
    assert check(p5)["action"] == "drain"
    assert updates(calls) == [f"update nodename={NODE} state=drain reason=fmcluster health: hw.xid,storage.mounts"]


def test_without_scontrol_the_failure_is_reported_not_raised(p5):
    (p5.bin / "scontrol").unlink()
    xid(p5, 79, "GPU has fallen off the bus.")
    out = check(p5)
    assert out["action"] == "drain" and out["result"].startswith("FAILED") and "unknown" in out["slurm_state"]


def test_the_checks_are_fast_level_and_exclude_configuration():
    by_id = {c.id: c for c in all_checks()}
    assert health_check.HEALTH_CHECKS <= set(by_id)
    assert {by_id[c].level for c in health_check.HEALTH_CHECKS} == {"fast"}
    assert not health_check.HEALTH_CHECKS & {"versions.pinned", "comm.env_hygiene", "fw.torch", "containers.data_root"}


# --- the program slurmd runs ------------------------------------------------------------------------------------


def install(tmp_path: Path, *args: str) -> List[str]:
    proc = subprocess.run([sys.executable, "-m", "fmcluster.runtime.health_check", "install", *args],
                          capture_output=True, text=True, timeout=30, env={"PATH": SYSTEM_PATH, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def run_program(path: str) -> subprocess.CompletedProcess:
    return subprocess.run([path], capture_output=True, text=True, timeout=60, env={})


def test_the_program_exits_0_and_logs_a_bounded_summary_even_without_a_profile(tmp_path):
    hooks = tmp_path / "slurm"
    (program,) = install(tmp_path, "--profile", str(tmp_path / "missing.json"), "--hook-dir", str(hooks),
                         "--node-name", NODE)
    text = Path(program).read_text()
    assert "timeout -k 5 40" in text and "head -c 2000" in text and text.rstrip().endswith("exit 0")
    assert os.access(program, os.X_OK)
    assert run_program(program).returncode == 0


def test_the_shim_runs_the_nodes_program_and_succeeds_without_one(tmp_path):
    hooks, shim = tmp_path / "slurm", tmp_path / "shared" / "fmcluster_health_check.sh"
    assert install(tmp_path, "--shim", str(shim), "--hook-dir", str(hooks)) == [str(shim)]
    assert run_program(str(shim)).returncode == 0  # no program on this node: nothing to do
    hooks.mkdir()
    marker = tmp_path / "ran"
    program = hooks / health_check.PROGRAM
    program.write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    program.chmod(0o755)
    assert run_program(str(shim)).returncode == 0 and marker.exists()


def test_install_without_anything_to_write_is_a_usage_error():
    assert health_check.main(["install"]) == 2


def test_slurm_settings_run_it_on_busy_nodes_cycling_through_the_interval():
    assert health_check.slurm_settings("/p", 300) == {
        "HealthCheckProgram": "/p", "HealthCheckInterval": "300", "HealthCheckNodeState": "ANY,CYCLE"}


def test_a_hung_scontrol_is_cut_off_and_reported(p5, monkeypatch):
    """In process, with scontrol's time cut to half a second: the run still ends and says why (the drain it then
    tries is cut off the same way, and reported)."""
    p5.tool("scontrol", "exec sleep 30\n")
    monkeypatch.setenv("PATH", f"{p5.bin}:{SYSTEM_PATH}")
    monkeypatch.setattr(health_check, "SCONTROL_TIMEOUT", 0.5)
    xid(p5, 79, "GPU has fallen off the bus.")
    args = health_check._parser().parse_args(["run", "--profile", str(p5.profile(policy="drain")), "--root",
                                              str(p5.root), "--node-name", NODE])
    out = health_check.run(args)
    assert out["slurm_state"] == f"unknown: scontrol show node {NODE}: timed out after 0.5s (killed)"
    assert out["action"] == "drain" and "timed out after 0.5s" in out["result"]

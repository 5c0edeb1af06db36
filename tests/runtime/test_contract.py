"""CLI contract, profile JSON, report formats, actions, version rules, concurrency and robustness."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fmcluster.runtime import actions, validate, versions
from fmcluster.runtime.checks import Check, Result, all_checks
from fmcluster.runtime.node import Node, run_command
from fmcluster.runtime.profile import KNOWN_GOOD_BUNDLE, NodeProfile, ProfileError
from fmcluster.runtime.validate import run_checks

from .conftest import REPO, SYSTEM_PATH, run_main


def _cli(*args, env=None):
    """`python -m fmcluster.runtime.validate ARGS` with the system's tools only: validate.main in this process
    (run_main); a node's start itself is run as a process by _process and FixtureNode.run_cli."""
    rc, out, err = run_main(validate.main, list(args), env={"PATH": SYSTEM_PATH, "PYTHONPATH": str(REPO),
                                                             **(env or {})}, cwd=Path.cwd())
    return subprocess.CompletedProcess(["validate", *args], rc, out, err)


def _process(*args, env=None):
    e = {"PATH": SYSTEM_PATH, "PYTHONPATH": str(REPO)}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "fmcluster.runtime.validate", *args], capture_output=True,
                          text=True, env=e, timeout=60)


@pytest.mark.parametrize("args", [
    [], ["--instance-type", "x9.huge"], ["--instance-type", "p5.48xlarge", "--level", "ludicrous"],
    ["--instance-type", "p5.48xlarge", "--profile", "x.json"], ["--profile", "/nonexistent.json"],
    ["--instance-type", "p5.48xlarge", "--root", "/nonexistent-root"],
    ["--instance-type", "p5.48xlarge", "--skip", "no.such.check"],
])
def test_usage_errors_exit_2(args):
    res = _cli(*args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_garbled_profile_exit_2(tmp_path):
    bad = tmp_path / "p.json"
    for text in ("{not json", "[]", '{"instance_type": "p5.48xlarge", "policy": "explode"}'):
        bad.write_text(text)
        res = _cli("--profile", str(bad))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr


def test_profile_round_trip_and_ml_prefix():
    p = NodeProfile.from_catalog("ml.p5.48xlarge", mounts=[{"path": "/fsx", "fstype": "lustre"}], policy="drain",
                                 exporters=[{"name": "dcgm", "url": "http://127.0.0.1:9400/metrics"}],
                                 level="fast", min_versions={"nccl": "2.27", "gdrcopy": None}, group="gpu")
    assert p.instance_type == "p5.48xlarge" and p.facts["efa_interfaces"] == 32
    assert p.min_versions["nccl"] == "2.27" and p.min_versions["gdrcopy"] is None
    assert p.min_versions["driver"] == "525.60.13"  # the catalog's compatibility floor for p5, not the newest bundle
    assert p.known_good == KNOWN_GOOD_BUNDLE
    q = NodeProfile.from_json(p.to_json())
    assert q == p
    assert json.loads(p.to_json())["schema"] == 1
    with pytest.raises(ProfileError):
        NodeProfile.from_catalog("p5.48xlarge", colour="blue")
    assert NodeProfile.from_catalog("m5.xlarge").instance_store is None


def test_instance_type_alone_on_an_empty_root_reports_without_crashing(tmp_path):
    res = _cli("--instance-type", "p6-b200.48xlarge", "--root", str(tmp_path), "--format", "json")
    assert res.returncode == 1
    rep = json.loads(res.stdout)
    assert rep["verdict"] == "fail" and rep["failing"]
    assert all(c["status"] != "error" or c["observed"] for c in rep["checks"])


def test_text_format_has_a_line_per_check_with_remedy(p5):
    (p5.root / "sys/module/nvidia/version").write_text("570.1.1\n")
    res = _process("--profile", str(p5.profile()), "--root", str(p5.root), "--level", "fast",
                   env={"PATH": f"{p5.bin}:{SYSTEM_PATH}"})
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert any(ln.startswith("FAIL  hw.driver.version") for ln in lines)
    assert any("remedy:" in ln for ln in lines)
    assert lines[-2].startswith("RESULT FAIL") or lines[-1].startswith("RESULT FAIL")


def test_prometheus_textfile_written_atomically(p5, tmp_path):
    prom = tmp_path / "textfile" / "fmcluster.prom"
    prom.parent.mkdir()
    prom.write_text("old\n")
    res = p5.run("--prom", str(prom))
    assert res.rc == 0
    text = prom.read_text()
    assert 'fmcluster_node_check_status{check="hw.xid",layer="hardware",status="pass"} 1' in text
    assert "fmcluster_node_check_duration_seconds{" in text
    assert "fmcluster_node_validation_last_run_timestamp_seconds{" in text
    assert "fmcluster_node_validation_healthy{" in text
    assert all(ln.startswith(("#", "fmcluster_node_")) for ln in text.splitlines())
    assert os.listdir(prom.parent) == ["fmcluster.prom"]


def test_drain_policy_calls_scontrol(p5):
    log = p5.base / "scontrol.log"
    p5.tool("scontrol", f'echo "$@" > {log}\n')
    p5.tool("nvidia-smi", "sleep 30\n")
    res = p5.run("--tool-timeout", "1", "--policy", "drain", "--node-name", "ip-10-1-2-3")
    assert res.rc == 1
    args = log.read_text()
    assert args.startswith("update nodename=ip-10-1-2-3 state=drain reason=fmcluster validate: hw.smi.gpus")
    assert res.report["action"]["result"] == "done"


def test_taint_policy_calls_kubectl_and_healthy_node_is_left_alone(p5):
    log = p5.base / "kubectl.log"
    p5.tool("kubectl", f'echo "$@" > {log}\n')
    res = p5.run("--policy", "taint")
    assert res.rc == 0 and not log.exists()
    p5.remove("/sys/module/efa")
    res = p5.run("--policy", "taint", "--node-name", "node-a", env={"KUBECONFIG": "/k"})
    assert res.rc == 1
    assert log.read_text().strip() == "--kubeconfig /k taint nodes node-a fmcluster.io/node-validation=failed:NoSchedule " \
                                      "--overwrite"


def test_action_failure_is_reported_not_raised():
    out = actions.act("drain", False, ["hw.xid"], "n1", env={"PATH": "/nonexistent"})
    assert out["result"].startswith("FAILED") and "not found" in out["result"]


def test_version_rules():
    assert versions.parse("2.6.0amzn1.0") == (2, 6, 0)
    assert versions.parse("1.13.2-aws") == (1, 13, 2)
    assert versions.at_least("1.22.0amzn5.0", "1.22")
    assert not versions.at_least("1.21.9", "1.22")
    assert versions.same("2.6.0amzn1.0", "2.6")
    p = versions.compatibility_problems({"aws_ofi_nccl": "1.13.2", "libfabric": "1.21.0"})
    assert p and "libfabric >= 1.22" in p[0]
    assert versions.compatibility_problems({"aws_ofi_nccl": "1.12.0", "efa_installer": "1.35.0"})
    assert versions.compatibility_problems({"nccl": "2.19.3", "efa_installer": "1.28.0"})
    assert not versions.compatibility_problems({"nccl": "2.19.3", "efa_installer": "1.29.0"})
    assert not versions.compatibility_problems({"nccl": "2.17.1"}, "p5")  # floors are the catalog's, judged per check
    assert versions.cuda_driver_ok("13.2", "575.57.08")[0] is False
    assert versions.cuda_driver_ok("12.8", "570.133.20")[0] is True


def test_a_broken_check_is_an_error_and_the_rest_still_run(p5):
    def boom(ctx):
        raise KeyError("surprise")

    checks = [Check("test.boom", "hardware", "fast", boom), *all_checks()]
    prof = NodeProfile.from_catalog("p5.48xlarge")
    node = Node(root=str(p5.root), tool_timeout=5, env={"PATH": f"{p5.bin}:{SYSTEM_PATH}"})
    outcomes = {o.check.id: o.result for o in run_checks(prof, "fast", node, 10, checks)}
    assert outcomes["test.boom"].status == "error" and "KeyError" in outcomes["test.boom"].observed
    assert outcomes["hw.gpu.pci"].status == "pass"


def test_overall_deadline_bounds_a_stuck_check(p5):
    def stuck(ctx):
        time.sleep(30)
        return Result("pass")

    prof = NodeProfile.from_catalog("p5.48xlarge")
    node = Node(root=str(p5.root), tool_timeout=5, env={"PATH": f"{p5.bin}:{SYSTEM_PATH}"})
    start = time.monotonic()
    outcomes = {o.check.id: o.result for o in run_checks(prof, "fast", node, 1.0, [Check("t.stuck", "hardware",
                                                                                          "fast", stuck)])}
    assert time.monotonic() - start < 3
    assert outcomes["t.stuck"].status == "error" and "budget" in outcomes["t.stuck"].observed


@pytest.mark.parametrize("efa", [False, True])
def test_standard_level_calls_each_command_once(p5, efa):
    prof = NodeProfile.from_catalog("p5.48xlarge", mounts=[{"path": "/fsx", "fstype": "lustre", "efa": efa}],
                                    orchestrator="slurm")
    node = Node(root=str(p5.root), tool_timeout=5, env={"PATH": f"{p5.bin}:{SYSTEM_PATH}"})
    outcomes = run_checks(prof, "standard", node, 30)
    assert all(o.result.status in ("pass", "skip") for o in outcomes), [(o.check.id, o.result.observed)
                                                                          for o in outcomes]
    assert len(node.calls) == len(set(node.calls))
    tools = {"nvidia-smi", "fi_info", "systemctl", "lfs", "dcgmi", "scontrol", "lctl", "df"}
    assert {c[0] for c in node.calls} == (tools | {"lnetctl"} if efa else tools)


def test_run_command_kills_the_process_group(tmp_path):
    """The tool's own children die with it: its background child is gone (or a zombie) once run_command returns."""
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "spawner"
    script.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pid_file}\nsleep 60\n")
    script.chmod(0o755)
    res = run_command([str(script)], 2.0)
    assert res.error and "timed out" in res.error
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 30  # SIGKILL is delivered at once; the bound only keeps a failure from hanging
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Whether pid is a process that still runs (a zombie, killed and not yet reaped, does not)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 33\n'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_exporters_answering_and_not(p5):
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_port}/metrics"
        res = p5.run(profile=p5.profile(exporters=[{"name": "dcgm-exporter", "url": url,
                                                     "expect": "DCGM_FI_DEV_GPU_TEMP"}]))
        assert res.status("exporters.http") == "pass"
        res = p5.run(profile=p5.profile(exporters=[{"name": "dcgm-exporter", "url": url, "expect": "nope"},
                                                   {"name": "node-exporter", "url": "http://127.0.0.1:1/metrics"}]))
        assert res.status("exporters.http") == "fail"
        assert "node-exporter: no answer" in res.check("exporters.http")["detail"]
    finally:
        srv.shutdown()


def test_skip_leaves_out_a_check_for_one_run(p5):
    """At boot the orchestrator agent is not running yet: node_bootstrap.sh skips its check then."""
    p5.edit_tool("systemctl", "for u in \"$@\"; do echo active; done",
                 "for u in \"$@\"; do [ \"$u\" = slurmd ] && echo inactive || echo active; done")
    assert p5.run().status("orch.agent") == "fail"
    res = p5.run("--skip", "orch.agent")
    assert res.status("orch.agent") == "skip" and "--skip" in res.check("orch.agent")["observed"]


def test_version_gap_checks_minimum_then_pin():
    prof = NodeProfile.from_catalog("p5.48xlarge", min_versions={"nccl": "2.21"}, pinned_versions={"nccl": "2.23.4"})
    assert prof.version_gap("nccl", "2.18.1") == "2.18.1 < minimum 2.21"
    assert prof.version_gap("nccl", "2.22.3") == "2.22.3 != pinned 2.23.4"
    assert prof.version_gap("nccl", "2.23.4") is None
    assert prof.version_gap("no-such-component", "1.0") is None  # neither minimum nor pin for it


@pytest.mark.parametrize("component, check_id", [("nccl", "dist.nccl"), ("libfabric", "efa.libfabric"),
                                                 ("aws_ofi_nccl", "ofi.plugin"), ("driver", "hw.driver.version")])
def test_every_version_check_honours_a_pin(p5, component, check_id):
    res = p5.run(profile=p5.profile(pinned_versions={component: "0.0.1"}))
    c = res.check(check_id)
    assert c["status"] == "fail" and "!= pinned 0.0.1" in c["detail"], c


def test_every_reader_of_the_mount_table_decodes_it_the_same_way(tmp_path):
    """One parser for /proc/mounts (runtime/mounts.py): the validator's probe, the Lustre helper and the HyperPod
    lifecycle all decode the kernel's octal escapes (space, tab, backslash) and agree on what is mounted where."""
    from fmcluster.platforms.storage.fsx_lustre.node import lustre
    from fmcluster.runtime import mounts
    from fmcluster.runtime.node_setup import storage
    from fmcluster.runtime.probes.mounts import mounts as probe_mounts

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text(
        "/dev/nvme0n1p1 / ext4 rw 0 0\n"
        "/dev/md0 /opt/dlami/nvme xfs rw,noatime 0 0\n"
        "10.0.1.5@tcp:/abcd /fsx\\040data lustre rw,flock 0 0\n"
        "tmpfs /mnt/tab\\011and\\134slash tmpfs rw 0 0\n"
        "garbage\n")
    table = {m.mount_point: m for m in mounts.parse((tmp_path / "proc/mounts").read_text())}
    assert set(table) == {"/", "/opt/dlami/nvme", "/fsx data", "/mnt/tab\tand\\slash"}
    assert storage.mount_points(str(tmp_path)) == {p: m.source for p, m in table.items()}

    class Ctx:
        node = Node(root=str(tmp_path), tool_timeout=1, env={})

        @staticmethod
        def memo(key, fn):
            return fn()

    assert probe_mounts(Ctx) == {p: (m.source, m.fstype, m.options) for p, m in table.items()}
    import argparse

    job = lustre.Job(argparse.Namespace(root=str(tmp_path)))
    assert lustre.mounted_at(job, "/fsx data") == ("10.0.1.5@tcp:/abcd", "lustre")


def test_every_node_side_reader_resolves_and_bounds_files_under_root_the_same_way(tmp_path):
    """runtime/rooted.py: the validator's Node, the Lustre helper and the lifecycle read `--root` trees alike, and a
    runaway file is cut at the limit, never held whole."""
    import argparse

    from fmcluster.platforms.storage.fsx_lustre.node import lustre
    from fmcluster.runtime import rooted

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/big").write_bytes(b"x" * (rooted.READ_LIMIT + 10))
    assert rooted.under("/", "/proc/big") == "/proc/big" and rooted.under(str(tmp_path), "/proc/big") == str(
        tmp_path / "proc/big")
    assert len(rooted.read_text(str(tmp_path), "/proc/big")) == rooted.READ_LIMIT
    node = Node(root=str(tmp_path), tool_timeout=1, env={})
    job = lustre.Job(argparse.Namespace(root=str(tmp_path)))
    assert node.path("/proc/big") == job.path("/proc/big") == rooted.under(str(tmp_path), "/proc/big")
    assert node.read("/proc/big") == job.read("/proc/big")

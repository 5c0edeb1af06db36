"""The node validator under hostile tools and inputs: bounded output, waiters always released, the drain inside the
deadline, and bad profiles or arguments as one line with exit 2; a node never ends without its report."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, List

import pytest

from fmcluster.runtime import node as node_access
from fmcluster.runtime.node import CmdResult, Node

REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 1 << 30  # address space of the validator process in the flooding test


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def test_a_flooding_tool_is_killed_at_the_output_cap_under_a_memory_limit(p5: Any) -> None:
    p5.tool("nvidia-smi", "exec yes 'GPU 0: NVIDIA H100 80GB HBM3 flooding the validator'\n")
    cmd = [sys.executable, "-m", "fmcluster.runtime.validate", "--profile", str(p5.profile()), "--root",
           str(p5.root), "--format", "json", "--deadline", "30"]
    env = {"PATH": f"{p5.bin}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(p5.base), "MALLOC_ARENA_MAX": "2"}
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, preexec_fn=_limit_memory)
    assert time.monotonic() - start < 60  # generous: without a cap it ran past its deadline or died
    assert "MemoryError" not in proc.stderr and "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    smi = next(c for c in report["checks"] if c["id"] == "hw.smi.gpus")
    assert smi["status"] == "error" and "printed more than" in smi["observed"] and "killed" in smi["observed"]
    assert next(c for c in report["checks"] if c["id"] == "efa.domains")["status"] == "pass"


def test_captured_output_is_capped_and_the_tool_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_access, "MAX_OUTPUT_BYTES", 1 << 16)
    r = node_access.run_command(["yes", "flood"], timeout=60)
    assert r.error is not None and "printed more than" in r.error and "(killed)" in r.error
    assert len(r.stdout) <= 1 << 16
    ok = node_access.run_command(["printf", "%s", "x" * 1000], timeout=60)
    assert ok.ok and ok.stdout == "x" * 1000


def test_waiters_are_released_when_the_shared_command_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()

    def exploding(argv: Any, timeout: float, env: Any = None) -> CmdResult:
        started.set()
        release.wait(10)
        raise MemoryError("tool output")

    monkeypatch.setattr(node_access, "run_command", exploding)
    node = Node(deadline=time.monotonic() + 3600)  # a waiter left waiting would wait an hour
    results: List[CmdResult] = []
    owner = threading.Thread(target=lambda: results.append(node.run(["nvidia-smi", "-q"])))
    owner.start()
    assert started.wait(10)
    waiter = threading.Thread(target=lambda: results.append(node.run(["nvidia-smi", "-q"])))
    waiter.start()
    release.set()
    owner.join(10)
    waiter.join(10)
    assert not owner.is_alive() and not waiter.is_alive()
    assert len(results) == 2 and all(r.error and "MemoryError" in r.error for r in results)


def test_a_hung_drain_counts_inside_the_deadline(p5: Any) -> None:
    p5.write("/sys/devices/virtual/dmi/id/product_name", "p5en.48xlarge\n")  # a failing check: the node is drained
    p5.tool("scontrol", "sleep 120\n")
    start = time.monotonic()
    res = p5.run_cli("--level", "fast", "--policy", "drain", "--deadline", "4", "--node-name", "n1", timeout=120)
    elapsed = time.monotonic() - start
    assert res.report is not None and res.report["verdict"] == "fail"
    waited = re.search(r"timed out after ([0-9.]+)s", res.report["action"]["result"])
    assert waited and float(waited.group(1)) <= 4  # the drain got what was left of --deadline, not 30 s of its own
    assert elapsed < 60  # generous


@pytest.mark.parametrize(
    "change, words",
    [
        ({"disabled_checks": None}, "disabled_checks: must be a list of check ids"),
        ({"instance_type": 5}, "instance_type: must be a string"),
        ({"facts": {"gpus": "eight"}}, "facts.gpus: must be a number"),
        ({"thresholds": {"gemm_fraction": "most"}}, "thresholds.gemm_fraction: must be a number"),
        ({"errors_fail": "no"}, "errors_fail: must be true or false"),
        ({"fabric_wait_s": "90"}, "fabric_wait_s: must be a number"),
        ({"min_versions": ["nccl"]}, "min_versions: must be an object"),
    ],
)
def test_bad_profile_values_are_one_line_exit_2(p5: Any, change: dict, words: str) -> None:
    profile = json.loads(p5.profile().read_text())
    if "facts" in change:
        profile["facts"].update(change["facts"])
    else:
        profile.update(change)
    path = p5.base / "bad-profile.json"
    path.write_text(json.dumps(profile))
    res = p5.run("--level", "fast", profile=path)
    assert res.rc == 2 and "Traceback" not in res.stderr
    [line] = res.stderr.splitlines()
    assert words in line


def test_deeply_nested_profile_json_is_one_line_exit_2(p5: Any) -> None:
    path = p5.base / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    res = p5.run(profile=path)
    assert res.rc == 2 and "Traceback" not in res.stderr and len(res.stderr.splitlines()) == 1


@pytest.mark.parametrize("args, env", [
    (["--deadline", "inf"], {}), (["--deadline", "nan"], {}), (["--tool-timeout", "nan"], {}),
    (["--deadline", "1e308"], {}), (["--tool-timeout", "1e12"], {}),  # finite, but past what a wait takes
    ([], {"FMCLUSTER_TOOL_TIMEOUT": "abc"}), ([], {"FMCLUSTER_TOOL_TIMEOUT": "-1"}),
])
def test_bad_arguments_are_one_line_exit_2(p5: Any, args: List[str], env: dict) -> None:
    res = p5.run("--level", "fast", *args, env=env)
    assert res.rc == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_help_works_whatever_the_environment_holds() -> None:
    env = {**os.environ, "FMCLUSTER_TOOL_TIMEOUT": "abc", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "fmcluster.runtime.validate", "--help"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0 and "--tool-timeout" in proc.stdout


def test_a_node_never_ends_without_its_report(p5: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from fmcluster.runtime import validate

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug in the report")

    monkeypatch.setattr(validate, "build_report", broken)
    rc = validate.main(["--profile", str(p5.profile()), "--root", str(p5.root), "--level", "fast",
                        "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and report["verdict"] == "error" and "a bug in the report" in report["error"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_prom_refuses_a_path_that_is_not_a_regular_file_before_any_check(p5: Any, tmp_path: Path) -> None:
    pipe, folder, link = tmp_path / "pipe", tmp_path / "folder", tmp_path / "link.prom"
    os.mkfifo(pipe)
    folder.mkdir()
    link.symlink_to(tmp_path / "elsewhere.prom")
    for target in (pipe, folder, link, "/dev/full", tmp_path / "missing" / "x.prom"):
        res = p5.run("--level", "fast", "--prom", str(target))
        assert res.rc == 2 and res.stdout == "", res.stderr  # refused before checking: no report
        assert res.stderr.startswith(f"error: --prom {target}: ") and len(res.stderr.splitlines()) == 1
    assert pipe.is_fifo() and folder.is_dir() and link.is_symlink() and os.path.exists("/dev/full")


def test_prom_replaces_a_regular_file_whole_and_leaves_no_temporary_file(p5: Any, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from fmcluster.runtime import report

    prom = tmp_path / "validate.prom"
    prom.write_text("old\n")
    synced: List[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(report.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    assert p5.run("--level", "fast", "--prom", str(prom)).rc in (0, 1)
    assert "fmcluster_node_validation_healthy" in prom.read_text() and len(synced) >= 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["validate.prom"]

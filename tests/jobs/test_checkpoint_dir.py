"""examples/jobs/resume/checkpoint_dir.py: a checkpoint counts once its marker is written and its directory renamed,
so the newest complete one is what every resume reads, whatever a crash left behind; train.py uses it as shipped."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys

import pytest
from helpers.resume_jobs import RESUME, checkpoint

spec = importlib.util.spec_from_file_location("checkpoint_dir", RESUME / "checkpoint_dir.py")
ckd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ckd)


def test_latest_is_the_newest_committed_step_never_a_partial_or_unmarked_one(tmp_path):
    checkpoint(tmp_path, 100)
    checkpoint(tmp_path, 900)
    checkpoint(tmp_path, 1200, complete=False)  # being written, or left by a crash
    unmarked = tmp_path / "step-00001300"  # named like a checkpoint but never committed (copied by hand, say)
    unmarked.mkdir()
    assert ckd.latest(tmp_path) == tmp_path / "step-00000900"
    assert ckd.latest(tmp_path / "missing") is None


def test_commit_writes_the_marker_then_renames(tmp_path):
    stage = ckd.staging(tmp_path, 42)
    stage.mkdir()
    (stage / "__0_0.distcp").write_bytes(b"x")
    final = ckd.commit(stage)
    assert final == tmp_path / "step-00000042" and not stage.exists()
    assert '"step": 42' in (final / "COMPLETE").read_text()
    with pytest.raises(ckd.CheckpointError, match="committed once"):
        ckd.staging(tmp_path, 42).mkdir() or ckd.commit(ckd.staging(tmp_path, 42))
    with pytest.raises(ckd.CheckpointError, match="not a staging directory"):
        ckd.commit(tmp_path / "step-00000042")


def test_persist_copies_a_complete_checkpoint_to_another_tier_and_commits_it_there(tmp_path):
    local = checkpoint(tmp_path / "nvme", 7)
    durable = tmp_path / "fsx"
    ckd.staging(durable, 7).mkdir(parents=True)  # an interrupted earlier copy of the same step
    copied = ckd.persist(local, durable)
    assert copied == durable / "step-00000007" and (copied / "__0_0.distcp").read_bytes() == b"shard"
    assert ckd.latest(durable) == copied and not ckd.staging(durable, 7).exists()
    assert ckd.persist(local, durable) == copied  # already there: kept
    with pytest.raises(ckd.CheckpointError, match="not a complete checkpoint"):
        ckd.persist(checkpoint(tmp_path / "nvme", 8, complete=False), durable)


def test_prune_keeps_the_newest_and_drops_only_stale_partials(tmp_path):
    for step in (1, 2, 3, 4):
        checkpoint(tmp_path, step)
    fresh = checkpoint(tmp_path, 5, complete=False)
    stale = checkpoint(tmp_path, 6, complete=False)
    now = stale.stat().st_mtime + ckd.STALE_PARTIAL_S + 1
    import os

    os.utime(fresh, (now, now))  # written just now by a running job
    removed = ckd.prune(tmp_path, keep=2, now=now)
    assert sorted(p.name for p in removed) == [".partial-step-00000006", "step-00000001", "step-00000002"]
    assert [p.name for p in ckd.complete(tmp_path)] == ["step-00000003", "step-00000004"] and fresh.exists()
    with pytest.raises(ckd.CheckpointError, match="keep at least 1"):
        ckd.prune(tmp_path, keep=0)


def test_the_command_line_prints_the_latest_or_nothing_and_exits_2_on_bad_input(tmp_path):
    script = str(RESUME / "checkpoint_dir.py")
    none = subprocess.run([sys.executable, script, "latest", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert (none.returncode, none.stdout) == (0, "")
    checkpoint(tmp_path, 3)
    found = subprocess.run([sys.executable, script, "latest", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert found.stdout.strip() == str(tmp_path / "step-00000003")
    bad = subprocess.run([sys.executable, script, "commit", str(tmp_path / "step-00000003")], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "not a staging directory" in bad.stderr and "Traceback" not in bad.stderr


def test_train_py_restores_the_durable_latest_and_commits_through_the_helper():
    """train.py needs PyTorch and GPUs to run; here: it parses, and it reads and writes checkpoints only through the
    helper's latest, staging, commit and prune (never a path of its own making)."""
    tree = ast.parse((RESUME / "train.py").read_text())
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "ckd"}
    assert {"latest", "staging", "commit", "prune", "name", "step_of"} <= used

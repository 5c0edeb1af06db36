"""Fixture nodes for the runtime validator: copy a healthy tree to tmp_path, break it, run the CLI on it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NODES = REPO / "tests" / "fixtures" / "nodes"
TYPES = ["p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"]
SYSTEM_PATH = "/usr/bin:/bin"


class FixtureNode:
    def __init__(self, base: Path, itype: str) -> None:
        self.base = base
        self.itype = itype
        self.root = base / "root"
        self.bin = base / "bin"

    # ---- editing -------------------------------------------------------------------------------------
    def write(self, rel: str, text: str) -> None:
        p = self.root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def append(self, rel: str, text: str) -> None:
        p = self.root / rel.lstrip("/")
        p.write_text(p.read_text() + text)

    def remove(self, rel: str) -> None:
        p = self.root / rel.lstrip("/")
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()

    def tool(self, name: str, body: str) -> None:
        p = self.bin / name
        p.write_text("#!/bin/sh\n" + body)
        p.chmod(0o755)

    def edit_tool(self, name: str, old: str, new: str, count: int = -1) -> None:
        p = self.bin / name
        text = p.read_text()
        assert old in text, f"{old!r} not in {name}"
        p.write_text(text.replace(old, new, count))

    def profile(self, **overrides) -> Path:
        sys.path.insert(0, str(REPO))
        from fmcluster.runtime.profile import NodeProfile

        overrides.setdefault("mounts", [{"path": "/fsx", "fstype": "lustre"}])
        overrides.setdefault("orchestrator", "slurm")
        path = self.base / "profile.json"
        path.write_text(NodeProfile.from_catalog(self.itype, **overrides).to_json())
        return path

    # ---- running -------------------------------------------------------------------------------------
    def run(self, *args: str, profile: Path | None = None, env: dict | None = None, timeout: float = 60):
        prof = ["--profile", str(profile or self.profile())]
        cmd = [sys.executable, "-m", "fmcluster.runtime.validate", *prof, "--root", str(self.root),
               "--format", "json", *args]
        e = {"PATH": f"{self.bin}:{SYSTEM_PATH}", "PYTHONPATH": str(REPO), "HOME": str(self.base)}
        e.update(env or {})
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e, cwd=str(self.base))
        report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None
        return Result(proc.returncode, report, proc.stdout, proc.stderr)


class Result:
    def __init__(self, rc: int, report: dict | None, stdout: str, stderr: str) -> None:
        self.rc = rc
        self.report = report
        self.stdout = stdout
        self.stderr = stderr

    def status(self, cid: str) -> str:
        assert self.report is not None, self.stderr
        return self.check(cid)["status"]

    def check(self, cid: str) -> dict:
        assert self.report is not None, self.stderr
        for c in self.report["checks"]:
            if c["id"] == cid:
                return c
        raise KeyError(cid)

    def not_passing(self) -> dict:
        assert self.report is not None, self.stderr
        return {c["id"]: c["status"] for c in self.report["checks"] if c["status"] not in ("pass", "skip")}


def copy_node(tmp_path: Path, itype: str) -> FixtureNode:
    dst = tmp_path / f"{itype}-node"
    shutil.copytree(NODES / f"{itype}-healthy", dst, symlinks=True)
    return FixtureNode(dst, itype)


@pytest.fixture(params=TYPES)
def any_node(request, tmp_path) -> FixtureNode:
    return copy_node(tmp_path, request.param)


@pytest.fixture
def p5(tmp_path) -> FixtureNode:
    return copy_node(tmp_path, "p5.48xlarge")


@pytest.fixture
def make_node(tmp_path):
    return lambda itype: copy_node(tmp_path, itype)


os.environ.setdefault("FMCLUSTER_TOOL_TIMEOUT", "5")

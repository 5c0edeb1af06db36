"""ParallelCluster's update checker answers `fmcluster diff` from one long-lived process per test worker (the product
starts scripts/pcluster_update_check.py once per diff, which is what a user runs; test_diff_pcluster_verdict.py runs
that path too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.parallelcluster import pcluster_update_check

from fmcluster.diff import pcluster

PCLUSTER_PYTHON = Path(__file__).resolve().parents[2] / ".venv-pcluster" / "bin" / "python"


@pytest.fixture(autouse=True)
def _checker_from_one_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not PCLUSTER_PYTHON.exists():
        pytest.fail("ParallelCluster is not installed: run `make setup` (it creates .venv-pcluster)")

    def ask(base, target, name):
        return pcluster_update_check(PCLUSTER_PYTHON, base, target, name, tmp_path)

    monkeypatch.setattr(pcluster, "RUNNER", [ask])

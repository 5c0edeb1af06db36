"""Fixtures for the ParallelCluster kind's tests: the examples are synthesized once per session (conftest at the
top), the offline schema gate runs in .venv-pcluster (make setup)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PCLUSTER_PYTHON = ROOT / ".venv-pcluster" / "bin" / "python"


@pytest.fixture(scope="session")
def pcluster_python() -> Path:
    """ParallelCluster's own schema lives in its own virtualenv; without it the gate cannot run, which is a failure."""
    if not PCLUSTER_PYTHON.exists():
        pytest.fail("ParallelCluster's schema is not installed: run `make setup` (it creates .venv-pcluster from "
                    "requirements-pcluster.lock)")
    return PCLUSTER_PYTHON

"""Fixtures for the ParallelCluster kind's tests: the examples are synthesized once per session (conftest at the
top), the offline schema gate runs in .venv-pcluster (make setup)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator

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


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Dict[str, str]]:
    """Fake credentials only; never the developer's profile, config or a real endpoint."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "aws-empty"
    empty.write_text("")
    env = {"AWS_CONFIG_FILE": str(empty), "AWS_SHARED_CREDENTIALS_FILE": str(empty), "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "FMCLUSTER_AWS_MAX_ATTEMPTS": "2"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    yield env

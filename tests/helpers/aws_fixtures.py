"""Fixtures for tests that call AWS APIs: fake credentials only, and moto. Import them into a conftest (or a test
module) to use them."""

from __future__ import annotations

from typing import Any, Dict, Iterator

import boto3
import pytest
from moto import mock_aws

from fmcluster.aws.session import new_session
from helpers.aws import REGION


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Dict[str, str]]:
    """Fake credentials only; never the developer's profile, config or a real endpoint."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "aws-empty"
    empty.write_text("")
    env = {"AWS_CONFIG_FILE": str(empty), "AWS_SHARED_CREDENTIALS_FILE": str(empty), "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true",
           "FMCLUSTER_AWS_MAX_ATTEMPTS": "2"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    # The test's own boto3 session, behind boto3.client() and make_ctx, made on first use: fresh, so no credentials
    # carry over from another test, and sharing fmcluster's one botocore data loader, so the service models and
    # endpoint data (EC2's model alone is megabytes of JSON) are parsed once per process, not once per session.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setattr(boto3, "setup_default_session", _session_sharing_the_service_models)
    yield env


def _session_sharing_the_service_models(**_: Any) -> None:
    boto3.DEFAULT_SESSION = new_session(None, REGION)


@pytest.fixture
def moto(aws_env: Dict[str, str]) -> Iterator[None]:
    with mock_aws():
        yield

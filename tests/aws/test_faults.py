"""Faults are answers: no credentials, unreachable endpoint, throttling with backoff, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, List

import pytest
from botocore.awsrequest import AWSResponse
from helpers.aws import BASE_SPEC, make_ctx, make_spec, preflight_checks

from fmcluster.aws.context import run_checks
from fmcluster.aws.session import client_config
from fmcluster.cli import main

THROTTLED = (b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message>"
             b"</Error><RequestId>r</RequestId></ErrorResponse>")
IDENTITY = (b'<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>'
            b"<Arn>arn:aws:iam::123456789012:user/t</Arn><UserId>AIDA</UserId><Account>123456789012</Account>"
            b"</GetCallerIdentityResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>"
            b"</GetCallerIdentityResponse>")


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


def fake_sts(ctx: Any, throttled: int, sleeps: List[float], monkeypatch: pytest.MonkeyPatch) -> List[int]:
    """An sts client whose first `throttled` HTTP sends answer 400 Throttling (retry logic runs for real)."""
    import botocore.endpoint
    import botocore.retries.bucket

    monkeypatch.setattr(botocore.endpoint.time, "sleep", sleeps.append)  # the exponential backoff
    monkeypatch.setattr(botocore.retries.bucket.TokenBucket, "acquire", lambda *a, **k: True)  # adaptive rate limit
    client = ctx.aws.client("sts")
    sent: List[int] = []

    def send(request: Any, **_: Any) -> AWSResponse:
        sent.append(1)
        if len(sent) <= throttled:
            return AWSResponse(request.url, 400, {}, _Raw(THROTTLED))
        return AWSResponse(request.url, 200, {}, _Raw(IDENTITY))

    client.meta.events.register("before-send.sts.GetCallerIdentity", send)
    return sent


def test_client_config_retries_adaptively() -> None:
    cfg = client_config(5)
    assert cfg.retries == {"mode": "adaptive", "total_max_attempts": 5}


def test_throttling_is_retried_with_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FMCLUSTER_AWS_MAX_ATTEMPTS", "4")
    ctx = make_ctx(make_spec(), account=None)
    sleeps: List[float] = []
    sent = fake_sts(ctx, 2, sleeps, monkeypatch)
    [r] = run_checks(ctx, preflight_checks(ctx.spec)[:1])
    assert r.status == "pass" and ctx.account == "123456789012"
    assert len(sent) == 3 and len(sleeps) == 2 and all(s >= 0 for s in sleeps)


def test_throttling_after_retries_is_an_error_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FMCLUSTER_AWS_MAX_ATTEMPTS", "3")
    ctx = make_ctx(make_spec(), account=None)
    sleeps: List[float] = []
    sent = fake_sts(ctx, 99, sleeps, monkeypatch)
    [r] = run_checks(ctx, preflight_checks(ctx.spec)[:1])
    assert len(sent) == 3 and len(sleeps) == 2
    assert r.status == "error" and "throttled by AWS after 3 attempts (Throttling: Rate exceeded)" in r.observed


@pytest.fixture
def spec_file(tmp_path: Path) -> str:
    import yaml

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(BASE_SPEC))
    return str(path)


def test_no_credentials_is_one_clear_result(monkeypatch: pytest.MonkeyPatch, spec_file: str, capsys: Any) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    assert main(["preflight", spec_file, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    [check] = out["checks"]
    assert check["id"] == "credentials" and check["status"] == "error"
    assert "no usable AWS credentials" in check["observed"] and "aws configure" in check["remedy"]


def test_unreachable_endpoint_is_one_clear_result(monkeypatch: pytest.MonkeyPatch, spec_file: str, capsys: Any) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("FMCLUSTER_AWS_MAX_ATTEMPTS", "1")
    assert main(["preflight", spec_file]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.out.splitlines()
    assert lines[0].startswith("ERROR credentials") and f"cannot reach the sts endpoint http://127.0.0.1:{port}" in lines[0]
    assert lines[2].startswith("NOT RUN: availability-zone, ")  # what the unreachable endpoint left unchecked
    assert lines[-1].endswith("-> exit 1") and len(lines) == 4  # result, fix, not run, summary
    assert main(["status", spec_file]) == 1
    assert "cannot reach the sts endpoint" in capsys.readouterr().out


def test_bad_input_exits_2(spec_file: str, tmp_path: Path, capsys: Any) -> None:
    assert main(["preflight", spec_file, "--profile", "no-such-profile"]) == 2
    assert "no AWS profile named 'no-such-profile'" in capsys.readouterr().err
    assert main(["preflight", spec_file, "--region", "us-west-2"]) == 2
    assert "differs from the spec's region us-east-1" in capsys.readouterr().err
    assert main(["preflight", str(tmp_path / "missing.yaml")]) == 2
    assert main(["status", str(tmp_path / "missing.yaml")]) == 2


@pytest.mark.parametrize("name, url, why", [
    ("AWS_ENDPOINT_URL", "http://[::1", "not a URL (Invalid IPv6 URL)"),
    ("AWS_ENDPOINT_URL", "localhost:5000", "give http:// or https:// and a host"),
    ("AWS_ENDPOINT_URL_EC2", "http://moto:99999", "not a URL"),
])
def test_an_endpoint_url_botocore_cannot_use_is_bad_input_not_a_bug(spec_file: str, capsys: Any,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     name: str, url: str, why: str) -> None:
    monkeypatch.setenv(name, url)
    for command in ("preflight", "status"):
        assert main([command, spec_file]) == 2
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(f"fmcluster: {name}={url!r}: {why}") and "fmcluster bug" not in line


def test_an_endpoint_botocore_refuses_mid_run_is_the_configuration_s_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    from fmcluster.aws.results import classify
    from fmcluster.aws.session import AwsSetupError

    fault = classify(AwsSetupError("the ec2 endpoint: Invalid endpoint: x"), "ec2")
    assert fault.fatal and "AWS configuration: the ec2 endpoint" in fault.outcome.observed
    assert "fmcluster bug" not in fault.outcome.remedy


def test_sessions_share_the_service_models_but_not_their_settings(aws_env: Any) -> None:
    """Each preflight or status run makes its own session; the models botocore ships are read once per process."""
    from fmcluster.aws.session import AwsClients

    east, west = AwsClients("us-east-1").session, AwsClients("us-west-2").session
    assert east is not west and east.region_name == "us-east-1" and west.region_name == "us-west-2"
    loader = east._session.get_component("data_loader")
    assert loader is west._session.get_component("data_loader")
    assert east.client("ec2").meta.region_name == "us-east-1" and west.client("ec2").meta.region_name == "us-west-2"

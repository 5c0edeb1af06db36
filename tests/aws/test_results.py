"""Faults are answers: classification of AWS errors, report rendering and exit codes."""

from __future__ import annotations

import json

import botocore.exceptions as bx
import pytest

from fmcluster.aws.results import ERROR, FAIL, PASS, SKIP, WARN, CheckResult, Report, classify


def client_error(code: str, op: str = "DescribeCapacityReservations") -> bx.ClientError:
    return bx.ClientError({"Error": {"Code": code, "Message": f"{code} message"}}, op)


@pytest.mark.parametrize("code", ["AccessDenied", "AccessDeniedException", "UnauthorizedOperation"])
def test_access_denied_is_cannot_check(code: str) -> None:
    f = classify(client_error(code), "ec2")
    assert f.outcome.status == WARN and not f.fatal
    assert f.outcome.observed.startswith("cannot check: access denied to ec2:DescribeCapacityReservations")
    assert "grant ec2:DescribeCapacityReservations" in f.outcome.remedy


def test_service_quotas_iam_prefix() -> None:
    f = classify(client_error("AccessDeniedException", "GetServiceQuota"), "service-quotas")
    assert "servicequotas:GetServiceQuota" in f.outcome.observed


@pytest.mark.parametrize("code", ["Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"])
def test_throttling_after_retries_is_error(code: str) -> None:
    f = classify(client_error(code), "ec2", attempts=6)
    assert f.outcome.status == ERROR and "throttled by AWS after 6 attempts" in f.outcome.observed
    assert not f.fatal


def test_no_credentials_is_fatal() -> None:
    f = classify(bx.NoCredentialsError(), "sts")
    assert f.fatal and f.outcome.status == ERROR
    assert "no usable AWS credentials" in f.outcome.observed and "aws sso login" in f.outcome.remedy


def test_unreachable_endpoint_is_fatal() -> None:
    f = classify(bx.EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), "sts")
    assert f.fatal and "cannot reach the sts endpoint http://127.0.0.1:9" in f.outcome.observed


@pytest.mark.parametrize("code", ["ExpiredToken", "InvalidClientTokenId", "AuthFailure"])
def test_rejected_credentials_are_fatal(code: str) -> None:
    f = classify(client_error(code, "GetCallerIdentity"), "sts")
    assert f.fatal and "rejected the credentials" in f.outcome.observed


def test_other_errors() -> None:
    assert "ec2:DescribeCapacityReservations failed: Boom" in classify(client_error("Boom"), "ec2").outcome.observed
    assert "does not implement" in classify(NotImplementedError("x"), "ec2").outcome.observed
    assert "internal error: KeyError" in classify(KeyError("k"), "ec2").outcome.observed


def report(*statuses: str) -> Report:
    checks = [CheckResult(f"c{i}", f"check {i}", s, f"obs {i}", f"exp {i}", f"fix {i}") for i, s in enumerate(statuses)]
    return Report("preflight", "x.yaml", "us-east-1", "123456789012", checks)


def test_exit_codes() -> None:
    assert report(PASS, WARN, SKIP).exit_code == 0
    assert report(PASS, FAIL).exit_code == 1
    assert report(PASS, ERROR).exit_code == 1


def test_text_and_json() -> None:
    r = report(PASS, FAIL)
    text = r.render_text()
    assert "PASS  c0" in text and "FAIL  c1" in text and "[expected: exp 1]" in text and "fix: fix 1" in text
    assert "fix: fix 0" not in text and text.endswith("-> exit 1")
    data = json.loads(json.dumps(r.to_dict()))
    assert set(data) >= {"spec", "region", "account", "checks"}
    assert set(data["checks"][0]) == {"id", "title", "status", "observed", "expected", "remedy", "duration_s", "ran"}


def test_html_error_bodies_become_one_short_line() -> None:
    body = "<!doctype html>\n<html><title>500 Internal Server Error</title>\n<p>" + "x" * 500 + "</p></html>"
    f = classify(bx.ClientError({"Error": {"Code": "500", "Message": body}}, "GetServiceQuota"), "service-quotas")
    assert "\n" not in f.outcome.observed and "<" not in f.outcome.observed
    assert "500 Internal Server Error" in f.outcome.observed and len(f.outcome.observed) < 300

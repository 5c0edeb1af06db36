"""A check that could not run is not a pass; the whole run ends by its deadline; each result prints as it ends."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest
import yaml
from botocore.awsrequest import AWSResponse
from helpers.aws import BASE_SPEC, make_ctx, make_spec, preflight_checks

from fmcluster.aws.context import PreflightCheck, run_checks
from fmcluster.aws.preflight import checks_for
from fmcluster.aws.results import PASS, Outcome, Report
from fmcluster.aws.session import AwsClients
from fmcluster.cli import main

FSX = {"fsx": {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 4800}}


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


def deny_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every AWS call of every client answers AccessDenied (as for a caller without any read permission)."""
    real = AwsClients.client

    def client(self: AwsClients, service: str) -> Any:
        c = real(self, service)
        if not getattr(c, "_denies", False):
            def denied(model: Any, **_: Any) -> Any:
                body = {"Error": {"Code": "AccessDeniedException", "Message": "no"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}
                return AWSResponse("https://stub", 400, {}, None), body

            c.meta.events.register("before-call.*.*", denied)
            c._denies = True
        return c

    monkeypatch.setattr(AwsClients, "client", client)


@pytest.fixture
def spec_file(tmp_path: Path) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({**BASE_SPEC, "storage": FSX}))
    return str(path)


def test_a_run_that_could_check_nothing_does_not_pass(monkeypatch: pytest.MonkeyPatch, spec_file: str,
                                                      capsys: Any) -> None:
    deny_everything(monkeypatch)
    assert main(["preflight", spec_file, "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["summary"]["pass"] == 0
    assert set(report["unchecked"]) == {c["id"] for c in report["checks"]}
    assert main(["preflight", spec_file, "--allow-unchecked"]) == 0
    assert "could not run -> exit 0" in capsys.readouterr().out


def test_a_failure_outranks_what_could_not_run() -> None:
    from fmcluster.aws.results import FAIL, CheckResult

    checks = [CheckResult("a", "a", FAIL), CheckResult("b", "b", "warn", "cannot check: x", ran=False)]
    assert Report("preflight", "s", "r", None, checks).exit_code == 1
    assert Report("preflight", "s", "r", None, checks[1:]).exit_code == 3
    assert Report("preflight", "s", "r", None, checks[1:], tolerate_unchecked=True).exit_code == 0


def test_the_remedy_names_the_action_of_the_call_that_was_denied() -> None:
    ctx = make_ctx(make_spec(storage=FSX))
    fsx = ctx.aws.client("fsx")

    def denied(**_: Any) -> Any:
        return AWSResponse("https://stub", 400, {}, None), {
            "Error": {"Code": "AccessDeniedException", "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 400}}

    fsx.meta.events.register("before-call.fsx.DescribeFileSystems", denied)
    [r] = run_checks(ctx, [c for c in preflight_checks(ctx.spec) if c.id == "quota:fsx"])
    assert "fsx:DescribeFileSystems" in r.remedy and "servicequotas:DescribeFileSystems" not in r.remedy
    assert not r.ran


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """127.0.0.1: accepts connections, reads requests, never answers (held open until the test ends)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    held: List[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def test_an_endpoint_that_never_answers_ends_the_run_at_the_first_timeout(
        monkeypatch: pytest.MonkeyPatch, spec_file: str, silent_endpoint: str, capsys: Any) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", silent_endpoint)
    monkeypatch.setenv("FMCLUSTER_AWS_MAX_ATTEMPTS", "1")  # one attempt: its read timeout is half the deadline
    start = time.monotonic()
    assert main(["preflight", spec_file, "--deadline", "4"]) == 1
    assert time.monotonic() - start < 60  # generous: the point is minutes, not the exact seconds
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("ERROR credentials") and "timed out" in lines[0]
    assert lines[2].startswith("NOT RUN: availability-zone, ") and "(an earlier call ended the run)" in lines[2]
    assert lines[-1].endswith("-> exit 1") and len(lines) == 4  # result, fix, what did not run, summary
    assert captured.err.splitlines()[0].startswith("preflight: [1/") and "ERROR credentials" in captured.err
    assert "Traceback" not in captured.err


def test_status_against_an_endpoint_that_never_answers_ends_in_time(
        monkeypatch: pytest.MonkeyPatch, spec_file: str, silent_endpoint: str, capsys: Any) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", silent_endpoint)
    monkeypatch.setenv("FMCLUSTER_AWS_MAX_ATTEMPTS", "1")
    start = time.monotonic()
    assert main(["status", spec_file, "--deadline", "4"]) == 1
    assert time.monotonic() - start < 60
    assert "timed out" in capsys.readouterr().out


def test_the_deadline_ends_a_check_that_hangs_and_the_rest_do_not_run() -> None:
    ctx = make_ctx(make_spec())
    ctx.deadline = time.monotonic() + 0.3
    never = threading.Event()
    hang = PreflightCheck("hang", "a call that never returns", "ec2", lambda c: Outcome(PASS) if never.wait(30) else
                          Outcome(PASS))
    later = PreflightCheck("later", "a later check", "ec2", lambda c: Outcome(PASS))
    printed: List[str] = []
    try:
        [first] = run_checks(ctx, [hang, later], progress=printed.append, deadline_s=0.3)
    finally:
        never.set()
    assert first.status == "error" and "did not finish within the preflight deadline of 0.3 s" in first.observed
    assert printed == [f"preflight: [1/2] ERROR hang: {first.observed}"]


@pytest.mark.parametrize("value", ["inf", "nan", "abc", "0", "-5", "1e12", "86401"])
def test_a_deadline_that_is_not_a_positive_number_up_to_a_day_is_bad_input(spec_file: str, value: str,
                                                                           capsys: Any) -> None:
    assert main(["preflight", spec_file, "--deadline", value]) == 2
    assert main(["status", spec_file, "--deadline", value]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "argument --deadline: " in err


def test_an_unparseable_answer_is_the_endpoint_s_fault_not_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = make_ctx(make_spec(), account=None)
    sts = ctx.aws.client("sts")
    sts.meta.events.register("before-send.sts.GetCallerIdentity",
                             lambda request, **_: AWSResponse(request.url, 200, {}, _Raw(b"<html>proxy login")))
    [r] = run_checks(ctx, checks_for(ctx.spec)[:1])
    assert r.status == "error" and "unreadable answer from the sts endpoint" in r.observed
    assert "fmcluster bug" not in r.remedy


def test_one_unreachable_service_mid_run_does_not_end_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.exceptions as bx

    def unreachable(c: Any) -> Outcome:
        raise bx.EndpointConnectionError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    ctx = make_ctx(make_spec())
    checks = [PreflightCheck("a", "answers", "ec2", lambda c: Outcome(PASS, "fine")),
              PreflightCheck("b", "no endpoint here", "pcs", unreachable),
              PreflightCheck("c", "answers too", "ec2", lambda c: Outcome(PASS, "fine"))]
    assert [r.status for r in run_checks(ctx, checks)] == ["pass", "error", "pass"]

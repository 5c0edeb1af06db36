"""The CLI against a moto server on 127.0.0.1: the real process (`python -m fmcluster`) once, then its commands in
this process over the same HTTP endpoint."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import boto3
import pytest
import yaml
from helpers.aws import BASE_SPEC, REGION

from fmcluster.aws.preflight import CDK_BOOTSTRAP_PARAMETER
from fmcluster.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bootstrapped(moto_server: str) -> str:
    """The server's region as `cdk bootstrap` leaves it (its version parameter); nothing else deployed."""
    ssm = boto3.client("ssm", region_name=REGION, endpoint_url=moto_server,
                       aws_access_key_id="testing", aws_secret_access_key="testing")  # noqa: S106
    ssm.put_parameter(Name=CDK_BOOTSTRAP_PARAMETER, Value="28", Type="String", Overwrite=True)
    return moto_server


def run_cli(url: str, *args: str, tmp_path: Path) -> Tuple[int, str, str]:
    empty = tmp_path / "aws-empty"
    empty.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",  # noqa: S105
               AWS_DEFAULT_REGION=REGION, AWS_CONFIG_FILE=str(empty), AWS_SHARED_CREDENTIALS_FILE=str(empty),
               AWS_EC2_METADATA_DISABLED="true", FMCLUSTER_AWS_MAX_ATTEMPTS="2", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "fmcluster", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def spec_file(tmp_path: Path, **changes: Any) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({**BASE_SPEC, **changes}))
    return str(path)


def statuses(out: str) -> Dict[str, str]:
    return {c["id"]: c["status"] for c in json.loads(out)["checks"]}


def test_the_cli_process_answers_what_moto_lacks_with_errors(bootstrapped: str, tmp_path: Path) -> None:
    """`python -m fmcluster` end to end: its exit code, the JSON report on stdout, progress on stderr. Without
    --skip, the calls moto lacks (EC2 Service Quotas; the DLAMI parameter under the /aws/service/ names moto
    reserves) are error answers, not tracebacks -> exit 1."""
    spec = spec_file(tmp_path, account="123456789012")
    code, out, err = run_cli(bootstrapped, "preflight", spec, "--json", tmp_path=tmp_path)
    assert code == 1 and "Traceback" not in err, out + err
    data = json.loads(out)
    assert data["account"] == "123456789012" and data["region"] == REGION and data["spec"] == spec
    got = statuses(out)
    assert got["quota:ec2-p-vcpus"] == "error" and got["credentials"] == "pass"
    assert "preflight: [2/" in err  # progress on stderr


def test_preflight_and_status_against_moto_server(bootstrapped: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's commands in this process, reaching the server over HTTP the way the process above does
    (AWS_ENDPOINT_URL): one interpreter start instead of one per command."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", bootstrapped)
    spec = spec_file(tmp_path, account="123456789012")

    # skip the checks moto cannot answer and everything else passes -> exit 0
    assert main(["preflight", spec, "--json", "--skip", "quota,image"]) == 0
    got = statuses(capsys.readouterr().out)
    assert got["credentials"] == got["availability-zone"] == got["offering:p5.48xlarge"] == "pass"
    assert got["cdk-bootstrap"] == got["stacks"] == "pass" and got["quota:ec2-p-vcpus"] == "skip"
    assert got["image:dlami-ubuntu-22.04:x86_64"] == "skip"

    # a type the AZ does not offer is a failed check with a remedy, in the text report too
    bad = spec_file(tmp_path, node_groups=[{"name": "gpu", "instance_type": "p6-b200.48xlarge", "count": 1}])
    assert main(["preflight", bad, "--skip", "quota,image"]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "offering:p6-b200.48xlarge" in x)
    assert line.startswith("FAIL") and "us-east-1c" in out

    # status after deploy: nothing deployed yet
    assert main(["status", spec, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["overall"] == "not deployed"

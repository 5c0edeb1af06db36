"""The real CLI (`python -m fmcluster`) in a subprocess against a moto server on 127.0.0.1."""

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


def test_preflight_and_status_against_moto_server(moto_server: str, tmp_path: Path) -> None:
    ssm = boto3.client("ssm", region_name=REGION, endpoint_url=moto_server,
                       aws_access_key_id="testing", aws_secret_access_key="testing")  # noqa: S106
    ssm.put_parameter(Name=CDK_BOOTSTRAP_PARAMETER, Value="28", Type="String", Overwrite=True)
    spec = spec_file(tmp_path, account="123456789012")

    # moto does not serve EC2 Service Quotas, and reserves /aws/service/ parameters (so the DLAMI parameter is
    # missing): skip both and everything else passes -> exit 0
    code, out, err = run_cli(moto_server, "preflight", spec, "--json", "--skip", "quota,image", tmp_path=tmp_path)
    assert code == 0, out + err
    data = json.loads(out)
    assert data["account"] == "123456789012" and data["region"] == REGION and data["spec"] == spec
    got = statuses(out)
    assert got["credentials"] == got["availability-zone"] == got["offering:p5.48xlarge"] == "pass"
    assert got["cdk-bootstrap"] == got["stacks"] == "pass" and got["quota:ec2-p-vcpus"] == "skip"
    assert got["image:dlami-ubuntu-22.04:x86_64"] == "skip"
    assert "preflight: [2/" in err and "Traceback" not in err  # progress on stderr

    # without --skip, the calls moto lacks are error answers, not tracebacks -> exit 1
    code, out, err = run_cli(moto_server, "preflight", spec, "--json", tmp_path=tmp_path)
    assert code == 1 and "Traceback" not in err
    assert statuses(out)["quota:ec2-p-vcpus"] == "error" and statuses(out)["credentials"] == "pass"

    # a type the AZ does not offer is a failed check with a remedy, in the text report too
    bad = spec_file(tmp_path, node_groups=[{"name": "gpu", "instance_type": "p6-b200.48xlarge", "count": 1}])
    code, out, _ = run_cli(moto_server, "preflight", bad, "--skip", "quota,image", tmp_path=tmp_path)
    assert code == 1
    line = next(x for x in out.splitlines() if "offering:p6-b200.48xlarge" in x)
    assert line.startswith("FAIL") and "us-east-1c" in out

    # status after deploy: nothing deployed yet
    code, out, _ = run_cli(moto_server, "status", spec, "--json", tmp_path=tmp_path)
    assert code == 1 and json.loads(out)["overall"] == "not deployed"

"""The first page on Amazon EKS: the scaffold needs an admin, the way in to the private endpoint is a Session Manager
port forward through a system node (the stack outputs the command), the first job the MPIJob through Kueue."""

from __future__ import annotations

import pytest
import yaml
from helpers.first_run import flattened, output, walk

from fmcluster.cli import main


@pytest.mark.long
def test_the_first_page_walks_from_init_to_the_first_job(tmp_path, capsys):
    w = walk(tmp_path, capsys, ["--orchestrator", "eks", "--instance-type", "p5en.48xlarge", "--count", "16",
                                "--region", "us-west-2", "--capacity", "capacity-block",
                                "--reservation-id", "cr-0123456789abcdef0",
                                "--admin", "arn:aws:iam::123456789012:role/ml-admin"])
    assert "cost:" in w.plan
    tunnel = flattened(output(w.outputs, "ApiTunnelCommand")["Value"])
    assert "--document-name AWS-StartPortForwardingSessionToRemoteHost" in tunnel
    assert "Name=tag:fmcluster:node-group,Values=system" in tunnel and "localPortNumber=8443" in tunnel
    assert any("--tls-server-name=$HOST" in line for line in w.summary["way_in"])
    _, job = yaml.safe_load_all(w.job)
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 16
    assert w.prepared.tests_dir.endswith("/opt/nccl-tests/build"), "the container image's build"


def test_without_an_admin_init_says_which_flag_and_writes_nothing(tmp_path, capsys):
    spec = tmp_path / "cluster.yaml"
    assert main(["init", str(spec), "--orchestrator", "eks", "--instance-type", "p5.48xlarge", "--count", "4",
                 "--region", "us-east-1"]) == 2
    assert "--admin" in capsys.readouterr().err and not spec.exists()

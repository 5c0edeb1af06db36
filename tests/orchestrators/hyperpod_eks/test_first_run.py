"""The first page on SageMaker HyperPod on EKS: the scaffold gives one team every GPU, the way in to the private
endpoint is a Session Manager port forward through a HyperPod system node, the first job the team's MPIJob."""

from __future__ import annotations

import pytest
import yaml
from helpers.first_run import flattened, output, walk


@pytest.mark.long
def test_the_first_page_walks_from_init_to_the_first_job(tmp_path, capsys):
    w = walk(tmp_path, capsys, ["--orchestrator", "hyperpod-eks", "--instance-type", "p5.48xlarge", "--count", "4",
                                "--region", "us-east-1", "--admin", "arn:aws:iam::123456789012:role/ml-admin"])
    assert "cost:" in w.plan
    tunnel = flattened(output(w.outputs, "ApiTunnelCommand")["Value"])
    assert '--target "sagemaker-cluster:<Fn::Select>_system-$(' in tunnel
    assert "AWS-StartPortForwardingSessionToRemoteHost" in tunnel
    _, job = yaml.safe_load_all(w.job)
    assert job["metadata"]["namespace"] == "hyperpod-ns-ml"
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 4
    assert w.prepared.tests_dir.endswith("/opt/nccl-tests/build"), "the container image's build"

"""The first page on SageMaker HyperPod (Slurm): the way in is a Session Manager shell on the controller (HyperPod's
sagemaker-cluster:<id>_<group>-<instance> target), the first job an sbatch script on the group's partition."""

from __future__ import annotations

import pytest
from helpers.first_run import flattened, output, walk


@pytest.mark.long
def test_the_first_page_walks_from_init_to_the_first_job(tmp_path, capsys):
    w = walk(tmp_path, capsys, ["--orchestrator", "hyperpod-slurm", "--instance-type", "p5.48xlarge", "--count", "2",
                                "--region", "us-east-2", "--availability-zone", "us-east-2b"])
    assert "cost:" in w.plan
    session = flattened(output(w.outputs, "SessionCommand")["Value"])
    assert session.startswith('aws ssm start-session --region us-east-2 --target "sagemaker-cluster:<Fn::Select>_controller-$(')
    assert "--instance-group-name-contains controller" in session
    assert "sagemaker-cluster:$(aws sagemaker describe-cluster" in w.summary["way_in"][-1]
    assert "#SBATCH --partition=h100" in w.job and "#SBATCH --nodes=2" in w.job
    # HyperPod publishes no nccl-tests for its Slurm AMI: the first job builds them once on the shared file system
    assert "/fsx/fmcluster/nccl/nccl-2.30.4-1-tests-2.18.3-" in w.prepared.tests_dir

"""The first page without an orchestrator: the scaffold's spec deploys launch templates, and the way in is a Session
Manager shell on an instance launched from them; the first job is the hostfile run of nccl-tests."""

from __future__ import annotations

import pytest
from helpers.first_run import flattened, output, walk


@pytest.mark.long
def test_the_first_page_walks_from_init_to_the_first_job(tmp_path, capsys):
    w = walk(tmp_path, capsys, ["--orchestrator", "none", "--instance-type", "p5.48xlarge", "--count", "2",
                                "--region", "us-west-2"])
    assert "cost:" in w.plan and "not included" in w.plan
    assert w.summary["deploy_order"][-1] == "none-h100-cluster"
    session = flattened(output(w.outputs, "SessionCommand")["Value"])
    assert session == w.summary["way_in"][-1]
    assert session.startswith("aws ssm start-session --region us-west-2 --target $(aws ec2 describe-instances")
    assert "Name=tag:fmcluster:cluster,Values=none-h100" in session
    assert "HOSTFILE=hosts bash" in w.job and "#SBATCH --nodes=2" in w.job
    assert w.prepared.tests_dir.endswith("/usr/local/cuda-13.2/efa/test-cuda-13.2"), "the Deep Learning AMI's build"

"""The first page on AWS ParallelCluster: the way in is a Session Manager shell on the head node, whose id the
cluster stack outputs; the first job an sbatch script on the group's queue."""

from __future__ import annotations

import pytest
from helpers.first_run import flattened, output, walk


@pytest.mark.long
def test_the_first_page_walks_from_init_to_the_first_job(tmp_path, capsys):
    w = walk(tmp_path, capsys, ["--orchestrator", "parallelcluster", "--instance-type", "p5en.48xlarge", "--count",
                                "2", "--region", "us-west-2", "--no-fsx"])
    assert "cost:" in w.plan
    session = flattened(output(w.outputs, "SessionCommand")["Value"])
    assert session.startswith("aws ssm start-session --region us-west-2 --target ")
    assert "OutputKey=='HeadNodeInstanceId'" in w.summary["way_in"][-1]
    assert "#SBATCH --partition=h200" in w.job
    # the official AMI has no NCCL; without FSx the build goes to the user's home, which the head node shares
    assert "/home/ml/.fmcluster/nccl/nccl-2.30.4-1-tests-2.18.3-" in w.prepared.tests_dir
    assert any(c.startswith("make ") for c in w.prepared.calls)

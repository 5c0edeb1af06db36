"""The first page on AWS PCS: the scaffold needs the PCS AMI, the way in is a Session Manager shell on the login
node, and the first job is an sbatch script on the group's partition."""

from __future__ import annotations

import pytest
from helpers.first_run import flattened, output, walk

from fmcluster.cli import main


@pytest.mark.long
def test_the_first_page_walks_from_init_to_the_first_job(tmp_path, capsys):
    w = walk(tmp_path, capsys, ["--orchestrator", "pcs", "--instance-type", "p5.48xlarge", "--count", "4",
                                "--region", "us-east-1", "--ami-id", "ami-0123456789abcdef0"])
    assert "cost:" in w.plan
    session = flattened(output(w.outputs, "LoginSessionCommand")["Value"])
    assert session == w.summary["way_in"][-1] and "Name=tag:fmcluster:node-group,Values=login" in session
    assert "#SBATCH --partition=h100" in w.job and "#SBATCH --nodes=4" in w.job
    assert w.prepared.tests_dir.endswith("/efa/test-cuda-13.2"), "the PCS AMI is built from the Deep Learning AMI"


def test_without_the_pcs_ami_init_says_which_flag_and_writes_nothing(tmp_path, capsys):
    spec = tmp_path / "cluster.yaml"
    assert main(["init", str(spec), "--orchestrator", "pcs", "--instance-type", "p5.48xlarge", "--count", "4",
                 "--region", "us-east-1"]) == 2
    assert "--ami-id" in capsys.readouterr().err and not spec.exists()

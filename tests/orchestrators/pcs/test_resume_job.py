"""examples/jobs/resume-train.sbatch on PCS (examples/pcs-p5en-capacity-block.yaml): the job Slurm requeues when a
node fails, resuming from the newest complete checkpoint of the spec's tier; PCS cannot honour the managed tier."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers.resume_jobs import JOBS, RESUME, ROOT, checkpoint, expected_settings, problems_with_checkpoints, run, shell_defaults

from fmcluster.registry import load_spec

SCRIPT = JOBS / "resume-train.sbatch"


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "examples" / "pcs-p5en-capacity-block.yaml")


def test_the_job_is_requeued_on_node_failure_and_keeps_one_output_file():
    directives = [line.split()[1] for line in SCRIPT.read_text().splitlines() if line.startswith("#SBATCH")]
    assert "--requeue" in directives and "--open-mode=append" in directives and "--exclusive" in directives
    assert "srun --kill-on-bad-exit=1 " in SCRIPT.read_text()


def test_its_checkpoint_defaults_are_the_specs(spec):
    defaults = shell_defaults(SCRIPT)
    for key, value in expected_settings(spec).items():
        assert defaults[key] == value, key


def test_a_requeued_attempt_resumes_from_the_newest_complete_checkpoint(tmp_path):
    run_dir = tmp_path / "fsx" / "resume-train-77"
    checkpoint(run_dir, 400)
    checkpoint(run_dir, 500, complete=False)  # the attempt the node failure cut short
    result, calls = run(SCRIPT, tmp_path, ("srun",), env={
        "SLURM_JOB_ID": "77", "SLURM_JOB_NAME": "resume-train", "SLURM_RESTART_COUNT": "1",
        "DURABLE_ROOT": str(tmp_path / "fsx"), "RESUME_DIR": str(RESUME)})
    assert result.returncode == 0, result.stderr
    assert f"attempt 2: resuming from {run_dir}/step-00000400" in result.stdout
    (call,) = calls
    assert call.startswith(f"srun --kill-on-bad-exit=1 {RESUME}/launch.sh --tier fsx --durable {run_dir} ")


def test_the_managed_tier_is_refused_with_its_source():
    (problem,) = problems_with_checkpoints("pcs-p5en-capacity-block", tier="managed", memory_percent=20)
    assert problem.startswith("checkpoints.tier: orchestrator pcs cannot honour tier managed:")
    assert "https://docs.aws.amazon.com/sagemaker/latest/dg/managed-tier-checkpointing-setup.html" in problem


def test_the_scripts_are_shellcheck_clean():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    r = subprocess.run([shellcheck, str(SCRIPT), str(RESUME / "launch.sh")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout

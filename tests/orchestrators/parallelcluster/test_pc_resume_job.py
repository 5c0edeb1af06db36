"""examples/jobs/resume-train.sbatch on ParallelCluster (examples/parallelcluster-p5.yaml): requeued by Slurm when a
node fails, it resumes from the spec's checkpoint tier; ParallelCluster cannot honour the managed tier."""

from __future__ import annotations

from helpers.resume_jobs import JOBS, ROOT, expected_settings, problems_with_checkpoints, shell_defaults

from fmcluster.registry import load_spec

SCRIPT = JOBS / "resume-train.sbatch"


def test_the_requeuing_job_defaults_to_the_specs_checkpoints():
    spec = load_spec(ROOT / "examples" / "parallelcluster-p5.yaml")
    assert "#SBATCH --requeue" in SCRIPT.read_text().splitlines()
    defaults = shell_defaults(SCRIPT)
    for key, value in expected_settings(spec).items():
        assert defaults[key] == value, key


def test_the_managed_tier_is_refused_with_its_source():
    (problem,) = problems_with_checkpoints("parallelcluster-p5", tier="managed", memory_percent=30)
    assert problem.startswith("checkpoints.tier: orchestrator parallelcluster cannot honour tier managed:")
    assert "managed-tier-checkpointing-setup.html" in problem and problem.endswith("use fsx, nvme, s3")

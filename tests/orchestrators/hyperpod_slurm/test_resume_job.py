"""examples/jobs/resume-train-hyperpod.sbatch on examples/hyperpod-slurm-p5.yaml: srun --auto-resume=1 lets HyperPod
replace a failed node and restart the step, which resumes from the newest complete checkpoint of the spec's tier
(instance NVMe, copied to FSx). HyperPod with Slurm has no managed tiered checkpointing: refused with AWS's word."""

from __future__ import annotations

from helpers.resume_jobs import JOBS, RESUME, ROOT, checkpoint, expected_settings, problems_with_checkpoints, run, shell_defaults

from fmcluster.registry import load_spec

SCRIPT = JOBS / "resume-train-hyperpod.sbatch"


def test_the_step_auto_resumes_in_its_allocation_rather_than_requeueing():
    text = SCRIPT.read_text()
    assert "exec srun --auto-resume=1 --kill-on-bad-exit=1 " in text
    assert "#SBATCH --requeue" not in text.splitlines()


def test_its_checkpoint_defaults_are_the_specs_nvme_tier():
    spec = load_spec(ROOT / "examples" / "hyperpod-slurm-p5.yaml")
    expected = expected_settings(spec)
    assert expected["TIER"] == "nvme" and expected["LOCAL_ROOT"] == "/opt/dlami/nvme/checkpoints"
    defaults = shell_defaults(SCRIPT)
    for key, value in expected.items():
        assert defaults[key] == value, key


def test_a_restarted_step_reads_the_durable_copy_and_writes_to_the_nvme(tmp_path):
    durable = tmp_path / "fsx" / "resume-train-9"
    checkpoint(durable, 60)
    result, (call,) = run(SCRIPT, tmp_path, ("srun",), env={
        "SLURM_JOB_ID": "9", "SLURM_JOB_NAME": "resume-train", "DURABLE_ROOT": str(tmp_path / "fsx"),
        "LOCAL_ROOT": str(tmp_path / "nvme"), "RESUME_DIR": str(RESUME)})
    assert result.returncode == 0, result.stderr
    assert f"resuming from {durable}/step-00000060" in result.stdout
    assert call.startswith("srun --auto-resume=1 --kill-on-bad-exit=1 ")
    assert f"--tier nvme --durable {durable} " in call and call.endswith(f"--local {tmp_path}/nvme/resume-train-9")


def test_the_managed_tier_is_refused_because_hyperpod_offers_it_on_eks_only():
    (problem,) = problems_with_checkpoints("hyperpod-slurm-p5", tier="managed", memory_percent=20)
    assert problem.startswith("checkpoints.tier: orchestrator hyperpod-slurm cannot honour tier managed: SageMaker "
                              "HyperPod offers managed tiered checkpointing on clusters orchestrated by Amazon EKS only")
    assert "whats-new/2025/09/managed-tiered-checkpointing-amazon-sagemaker-hyperpod" in problem

"""examples/jobs/resume/launch.sh: one torchrun per node, its rendezvous on the first node of the allocation as it is
when the step (re)starts, so a restart on replaced nodes finds its peers."""

from __future__ import annotations

from helpers.resume_jobs import RESUME, run

LAUNCH = RESUME / "launch.sh"


def test_under_slurm_the_rendezvous_is_the_first_node_of_the_current_allocation(tmp_path):
    result, calls = run(LAUNCH, tmp_path, ("scontrol", "torchrun"), args=("--tier", "fsx"), env={
        "SLURM_JOB_ID": "12", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "gpu-[7,9]",
        "STUB_NODES": "gpu-9 gpu-7", "GPUS_PER_NODE": "8"})
    assert result.returncode == 0, result.stderr
    assert calls[0] == "scontrol show hostnames gpu-[7,9]"
    assert calls[1] == (f"torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=gpu-9:29500 "
                        f"--rdzv-id=12 {RESUME}/train.py --tier fsx")


def test_without_slurm_it_needs_a_hostfile_and_a_run_name(tmp_path):
    result, calls = run(LAUNCH, tmp_path, ("torchrun",))
    assert result.returncode != 0 and "HOSTFILE must name the nodes" in result.stderr and calls == []
    empty = tmp_path / "hosts"
    empty.write_text("\n")
    result, calls = run(LAUNCH, tmp_path, ("torchrun",), env={"HOSTFILE": str(empty), "RUN": "r"})
    assert result.returncode == 2 and "no rendezvous host" in result.stderr and calls == []

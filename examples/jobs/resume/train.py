"""A training loop that survives a replaced node: it resumes from the newest complete checkpoint of its tier and
checkpoints every --interval-minutes with PyTorch Distributed Checkpoint (every rank writes its own shard).

Run under torchrun (Slurm: srun; Kubernetes: the pod's command), with checkpoint_dir.py beside it:

    torchrun ... train.py --tier fsx  --durable /fsx/checkpoints/$RUN
    torchrun ... train.py --tier nvme --durable /fsx/checkpoints/$RUN --local /opt/dlami/nvme/checkpoints/$RUN

fsx: ranks write into <durable>/.partial-step-N, rank 0 commits it (marker, then rename) once every rank is done.
nvme: ranks write into <local>/.partial-step-N on their node's instance NVMe, each node commits its own copy and then
copies it into the shared <durable> staging directory in the background; rank 0 commits there once every node's copy
is in. A replaced node has an empty NVMe, so a restart always reads the durable copy, which every rank sees.

The model and data are synthetic stand-ins of a real job's: replace `build` and `batches` with yours; the
checkpointing and resume logic stays as it is.
"""

from __future__ import annotations

import argparse
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Optional

import checkpoint_dir as ckd
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel


def build(device: torch.device) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096)).to(device)


def batches(step: int, device: torch.device) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(step * dist.get_world_size() + dist.get_rank())
    return torch.randn(32, 4096, generator=g).to(device)


def broadcast_step(path: Optional[Path]) -> Optional[int]:
    """Rank 0's view of the newest durable step, the same on every rank (they must load one checkpoint)."""
    box = [ckd.step_of(path) if path is not None else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def restore(model: torch.nn.Module, optim: torch.optim.Optimizer, durable: Path) -> int:
    step = broadcast_step(ckd.latest(durable) if dist.get_rank() == 0 else None)
    if step is None:
        return 0
    model_sd, optim_sd = get_state_dict(model, optim)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(durable / ckd.name(step)))
    set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return step


class Saver:
    def __init__(self, tier: str, durable: Path, local: Optional[Path], keep: int, gloo: dist.ProcessGroup) -> None:
        self.tier, self.durable, self.local, self.keep, self.gloo = tier, durable, local, keep, gloo
        self.copy: Optional[threading.Thread] = None
        self.node_leader = int(os.environ.get("LOCAL_RANK", "0")) == 0

    def save(self, model: torch.nn.Module, optim: torch.optim.Optimizer, step: int) -> None:
        self.wait()  # the previous copy to FSx is in before the next checkpoint starts
        model_sd, optim_sd = get_state_dict(model, optim)
        root = self.local if self.tier == "nvme" else self.durable
        assert root is not None
        stage = ckd.staging(root, step)
        if dist.get_rank() == 0 or (self.tier == "nvme" and self.node_leader):
            shutil.rmtree(stage, ignore_errors=True)  # a partial of this step from an earlier attempt
            stage.mkdir(parents=True)
        dist.barrier()
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(stage))
        dist.barrier()  # every shard is written
        if self.tier == "fsx":
            if dist.get_rank() == 0:
                ckd.commit(stage)
                ckd.prune(self.durable, self.keep)
            return
        committed = ckd.commit(stage) if self.node_leader else None
        self.copy = threading.Thread(target=self._to_durable, args=(committed, step), daemon=True)
        self.copy.start()

    def _to_durable(self, committed: Optional[Path], step: int) -> None:
        """Every node's files into the shared staging directory; rank 0 commits it when all nodes are in. Runs on a
        side thread with a gloo group, so NCCL work on the GPUs goes on."""
        shared = ckd.staging(self.durable, step)
        if dist.get_rank() == 0:
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir(parents=True)
        dist.barrier(group=self.gloo)
        if committed is not None:
            shutil.copytree(committed, shared, dirs_exist_ok=True, ignore=shutil.ignore_patterns(ckd.MARKER))
            assert self.local is not None
            ckd.prune(self.local, self.keep)
        dist.barrier(group=self.gloo)
        if dist.get_rank() == 0:
            ckd.commit(shared)
            ckd.prune(self.durable, self.keep)

    def wait(self) -> None:
        if self.copy is not None:
            self.copy.join()
            self.copy = None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tier", choices=("fsx", "nvme"), required=True)
    ap.add_argument("--durable", type=Path, required=True, help="the shared directory every node restores from")
    ap.add_argument("--local", type=Path, help="nvme: the directory on the node's instance NVMe")
    ap.add_argument("--interval-minutes", type=float, default=30.0)
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100_000)
    args = ap.parse_args()
    if args.tier == "nvme" and args.local is None:
        ap.error("--tier nvme needs --local (a directory on the instance NVMe)")

    dist.init_process_group("nccl")
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    model = DistributedDataParallel(build(device), device_ids=[device.index])
    optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
    saver = Saver(args.tier, args.durable, args.local, args.keep, dist.new_group(backend="gloo"))

    step = restore(model, optim, args.durable)
    if args.tier == "nvme" and saver.node_leader:
        # a node that survived may hold local steps newer than the durable one (its copy to FSx was cut short):
        # training repeats those steps, and their checkpoints are written again
        for stale in ckd.complete(args.local):
            if (ckd.step_of(stale) or 0) > step:
                shutil.rmtree(stale)
    if dist.get_rank() == 0:
        print(f"resuming after step {step}" if step else "no complete checkpoint: starting at step 0", flush=True)
    last = time.monotonic()
    while step < args.steps:
        step += 1
        loss = model(batches(step, device)).float().pow(2).mean()
        optim.zero_grad(set_to_none=True)
        loss.backward()
        optim.step()
        due = torch.tensor([time.monotonic() - last >= args.interval_minutes * 60], device=device)
        dist.all_reduce(due, op=dist.ReduceOp.MAX)  # every rank checkpoints at the same step
        if due.item() or step == args.steps:
            saver.save(model, optim, step)
            last = time.monotonic()
            if dist.get_rank() == 0:
                print(f"step {step}: loss {loss.item():.4f}, checkpoint written", flush=True)
    saver.wait()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

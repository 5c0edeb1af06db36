"""Checkpoint size, write and restore time to the instance NVMe and to each shared store; the data path.

A full training checkpoint holds the weights and the optimizer state as the framework keeps
them, gradients are not saved: bf16 weights (2 bytes) and fp32 master weights, Adam momentum
and variance (12; ZeRO arXiv:1910.02054 §3.1) with Megatron-LM and DeepSpeed, 14 bytes per
parameter; FSDP2's fp32 weights (4) and Adam state (8), 12 bytes. Every GPU writes its own shard at once
(sharded checkpoints, e.g. PyTorch Distributed Checkpoint), so a target's time is
size / min(what the writers can push, what the target takes). What each shared store takes, and
how it moves data on to S3, is the store's (its figures.py: `StoreFigures.checkpoint_targets`); the
instance NVMe's rates are its declaration's (platforms/storage/instance_nvme/tier.py). Unverified
rates are generous, so every time stays a lower bound. With a `checkpoints` section, ``tier`` holds
the figures of the tier the spec deploys (checkpoint_tier.py): its blocking write, restore after a
replaced node, overhead and cost. A store that offers a checkpoint tier of its own and bills by use
(Mountpoint for Amazon S3) adds ``<tier>_cost``: what its checkpoints cost a month.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Optional

from fmcluster.planner.checkpoint_tier import chosen_tier, managed_target
from fmcluster.planner.figures import fig, val
from fmcluster.planner.models import Model
from fmcluster.planner.steptime import Step
from fmcluster.planner.stores import KIT, file_system_figures, stores
from fmcluster.platforms.storage.instance_nvme.tier import NVME

CHECKPOINT_BYTES_PER_PARAM = 14
MB = 1e6


@lru_cache(maxsize=1)
def storage_facts() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((Path(__file__).parent / "data" / "storage.json").read_text(encoding="utf-8"))
    return data


def checkpoint(model: Model, group: Any, spec: Any, step: Step, weight_bytes: int = 2,
               optimizer_bytes: int = CHECKPOINT_BYTES_PER_PARAM - 2,
               usd_per_hour: Optional[float] = None) -> Dict[str, Any]:
    per_param = weight_bytes + optimizer_bytes
    size = per_param * model.params
    targets = [nvme(size, group, step, spec)]
    priced = []  # (tier, figures, section) of each store whose own tier is planned: it bills by use
    for _, figures, section in stores(spec):
        found = figures.checkpoint_targets(spec, section, size, group, lambda s: _steps(s, step), KIT)
        targets += found
        priced += [(t["store_tier"], figures, section) for t in found if t.get("store_tier")]
    if spec.checkpoints is not None and spec.checkpoints.tier == "managed":
        memory = managed_target(size, group, storage_facts()["managed_memory_tier"])
        memory["write_steps"] = _steps(val(memory["write"]), step)
        targets.insert(0, memory)
    out: Dict[str, Any] = {
        "size": fig(size, "bytes", f"{per_param} bytes x params ({weight_bytes} of weights + {optimizer_bytes} of "
                    "optimizer state, as the framework keeps them)", params=model.params),
        "bytes_per_param": per_param,
        "targets": targets,
        "tier": chosen_tier(size, group, spec, targets, storage_facts(), usd_per_hour),
    }
    ck = spec.checkpoints
    keep, interval = (ck.keep, ck.interval_minutes) if ck is not None else (3, 30)
    for tier, figures, section in priced:
        cost: Dict[str, Any] = {"keep": keep, "interval_minutes": interval, "assumed": ck is None,
                                "classes": figures.checkpoint_cost(spec, section, size, keep, interval, KIT)}
        # beside it, how each summarised store bills what it holds
        cost.update({store.spec_key: other.capacity_billing(spec, sec) if sec is not None else None
                     for store, other, sec in stores(spec) if other.summarised})
        out[f"{tier}_cost"] = cost
    return out


def _steps(seconds: float, step: Step) -> float:
    return seconds / step.bound_s if step.bound_s > 0 else 0.0


def nvme(size: float, group: Any, step: Step, spec: Any) -> Dict[str, Any]:
    """Writing every node's shards to its own instance NVMe (the declared tier `NVME`) and reading them back."""
    t = group.instance
    node = NVME.size(t)
    if node is None or not node.verified:
        return {"target": NVME.title, "available": False,
                "reason": f"the catalog has no verified instance store for {t.name}"}
    disks = group.count * node.disks
    write_bps, read_bps = disks * NVME.write_mbps_per_disk * MB, disks * NVME.read_mbps_per_disk * MB
    write = fig(size / write_bps, "s", "size / (nodes x disks x per-disk write MB/s)", size=size, nodes=group.count,
                disks_per_node=node.disks, write_mbps_per_disk=NVME.write_mbps_per_disk)
    read = fig(size / read_bps, "s", "size / (nodes x disks x per-disk read MB/s)", size=size, nodes=group.count,
               disks_per_node=node.disks, read_mbps_per_disk=NVME.read_mbps_per_disk)
    shared = file_system_figures(spec)
    return {"target": NVME.title, "available": True, "write": write, "restore": read,
            "write_steps": _steps(val(write), step), "durable": False, "unverified": NVME.rates_unverified,
            "path": NVME.path, "gb_per_node": node.gb,
            "note": f"local and lost with the node; copy to {shared[1].short if shared else 'a shared store'} or S3 "
                    "for durability"}


def data_path(step: Step, spec: Any, bytes_per_token: float, group: Any = None) -> Dict[str, Any]:
    """Tokens per second the input pipeline must sustain at the step bound, against each shared store: the stores
    that stream by use first, then the shared file system's verdict (``delivers``)."""
    tps = step.tokens_per_s
    need = fig(tps * bytes_per_token, "bytes/s", "tokens per step / step bound x bytes per token",
               tokens_per_step=step.tokens, step_bound_s=step.bound_s, bytes_per_token=bytes_per_token)
    out: Dict[str, Any] = {"tokens_per_s": fig(tps, "tokens/s", "tokens per step / step bound", tokens_per_step=step.tokens,
                                               step_bound_s=step.bound_s), "bytes_per_s": need}
    found = list(stores(spec))
    if group is not None:
        for _, figures, section in found:
            if not figures.summarised:
                out.update(figures.stream(spec, section, val(need), group, KIT))
    for _, figures, section in found:
        if figures.summarised:
            out.update(figures.stream(spec, section, val(need), group, KIT))
    return out

"""Checkpoint size, write and restore time to NVMe, FSx for Lustre and S3; the data path.

A full training checkpoint holds the weights and the optimizer state as the framework keeps
them, gradients are not saved: bf16 weights (2 bytes) and fp32 master weights, Adam momentum
and variance (12; ZeRO arXiv:1910.02054 §3.1) with Megatron-LM and DeepSpeed, 14 bytes per
parameter; FSDP2's fp32 weights (4) and Adam state (8), 12 bytes. Every GPU writes its own shard at once
(sharded checkpoints, e.g. PyTorch Distributed Checkpoint), so a target's time is
size / min(what the writers can push, what the target takes). FSx for Lustre takes
capacity x throughput per TiB (FSx performance guide). Data repository associations move
data to and from S3 through the file servers: the export reads what the write put there,
both against the same throughput, so S3 holds a checkpoint no sooner than
max(size / rate, 2 x size / FSx throughput) after the write starts; a restore from S3
imports then reads, the same bound. Rates from data/storage.json (the instance NVMe's from its declaration,
platforms/storage/instance_nvme/tier.py); unverified ones are
generous, so every time stays a lower bound. With a `checkpoints` section, ``tier`` holds the figures of the tier the
spec deploys (checkpoint_tier.py): its blocking write, restore after a replaced node, overhead and cost.
The S3 store (Mountpoint for Amazon S3, s3_store.py) is a target when the spec has it, and a comparison beside FSx
when the spec has FSx only; ``s3_cost`` says what its checkpoints cost a month on S3 Standard and S3 Express One Zone.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional

from fmcluster.planner import s3_store
from fmcluster.planner.checkpoint_tier import chosen_tier, managed_target
from fmcluster.planner.figures import GB, fig, val
from fmcluster.planner.models import Model
from fmcluster.planner.steptime import Step
from fmcluster.platforms.storage.instance_nvme.tier import NVME

CHECKPOINT_BYTES_PER_PARAM = 14
SCRATCH_2_MBPS_PER_TIB = 200
MB = 1e6


@lru_cache(maxsize=1)
def storage_facts() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((Path(__file__).parent / "data" / "storage.json").read_text(encoding="utf-8"))
    return data


def fsx_bytes_per_s(spec: Any) -> Optional[float]:
    fsx = spec.storage.fsx
    if fsx is None:
        return None
    return fsx.storage_capacity_gib / 1024 * (fsx.throughput or SCRATCH_2_MBPS_PER_TIB) * MB


def checkpoint(model: Model, group: Any, spec: Any, step: Step, weight_bytes: int = 2,
               optimizer_bytes: int = CHECKPOINT_BYTES_PER_PARAM - 2,
               usd_per_hour: Optional[float] = None) -> Dict[str, Any]:
    per_param = weight_bytes + optimizer_bytes
    size = per_param * model.params
    targets = [nvme(size, group, step), *fsx_and_s3(size, group, spec, step)]
    if spec.checkpoints is not None and spec.checkpoints.tier == "managed":
        memory = managed_target(size, group, storage_facts()["managed_memory_tier"])
        memory["write_steps"] = _steps(val(memory["write"]), step)
        targets.insert(0, memory)
    s3 = s3_target(size, group, spec, step)
    if s3 is not None:
        targets.append(s3)
    out: Dict[str, Any] = {
        "size": fig(size, "bytes", f"{per_param} bytes x params ({weight_bytes} of weights + {optimizer_bytes} of "
                    "optimizer state, as the framework keeps them)", params=model.params),
        "bytes_per_param": per_param,
        "targets": targets,
        "tier": chosen_tier(size, group, spec, targets, storage_facts(), usd_per_hour),
    }
    if s3 is not None:
        ck = spec.checkpoints
        keep, interval = (ck.keep, ck.interval_minutes) if ck is not None else (3, 30)
        from fmcluster.planner.cost import prices

        out["s3_cost"] = {"keep": keep, "interval_minutes": interval, "assumed": ck is None,
                          "classes": s3_store.monthly_cost(size, keep, interval, prices(), storage_facts(),
                                                           spec.region),
                          "fsx": "FSx for Lustre bills its provisioned capacity, whatever it holds: unpriced in this "
                                 "data (see the cost section)" if spec.storage.fsx is not None else None}
    return out


def s3_target(size: float, group: Any, spec: Any, step: Step) -> Optional[Dict[str, Any]]:
    """The S3 store as a checkpoint target: the spec's (writable or not), or S3 Standard as a comparison beside FSx."""
    found = s3_store.section(spec)
    if found is None and spec.storage.fsx is None:
        return None
    clients = client_bytes_per_s(group, False)  # Mountpoint speaks TCP over ENA, never EFA
    t = s3_store.target(size, storage_facts(), clients, s3_store.express(found), configured=found is not None)
    t["comparison"] = found is None or bool(found[1].checkpoint_problems())
    if found is not None and t["comparison"]:
        t["note"] += f"; a comparison: storage.{found[0]} is read-only and takes no checkpoints"
    t["write_steps"] = _steps(val(t["write"]), step)
    return t


def _steps(seconds: float, step: Step) -> float:
    return seconds / step.bound_s if step.bound_s > 0 else 0.0


def nvme(size: float, group: Any, step: Step) -> Dict[str, Any]:
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
    return {"target": NVME.title, "available": True, "write": write, "restore": read,
            "write_steps": _steps(val(write), step), "durable": False, "unverified": NVME.rates_unverified,
            "path": NVME.path, "gb_per_node": node.gb,
            "note": "local and lost with the node; copy to FSx or S3 for durability"}


def client_bytes_per_s(group: Any, fsx_efa: bool) -> float:
    t = group.instance
    per_node_gbps = t.efa_gbps if fsx_efa and group.efa_enabled else t.network_gbps / max(t.network_cards, 1)
    return group.count * per_node_gbps / 8 * GB


def fsx_and_s3(size: float, group: Any, spec: Any, step: Step) -> List[Dict[str, Any]]:
    fsx = spec.storage.fsx
    ceiling = fsx_bytes_per_s(spec)
    if fsx is None or ceiling is None:
        return [{"target": "FSx for Lustre", "available": False, "reason": "the spec has no storage.fsx"},
                {"target": "S3 (data repository association)", "available": False, "reason": "the spec has no storage.fsx"}]
    clients = client_bytes_per_s(group, fsx.efa)
    rate = min(ceiling, clients)
    tib, per_tib = fsx.storage_capacity_gib / 1024, fsx.throughput or SCRATCH_2_MBPS_PER_TIB
    inputs = dict(size=size, capacity_tib=tib, mbps_per_tib=per_tib, client_bytes_per_s=clients)
    formula = "size / min(capacity TiB x MB/s per TiB, nodes x client network)"
    write = fig(size / rate, "s", formula, **inputs)
    limited_by = "file system throughput" if ceiling <= clients else "client network"
    fsx_target = {"target": "FSx for Lustre", "available": True, "write": write, "restore": fig(size / rate, "s", formula,
                  **inputs), "write_steps": _steps(val(write), step), "limited_by": limited_by, "durable": fsx.persistent,
                  "unverified": True, "note": "PERSISTENT_2 replicates within the AZ" if fsx.persistent
                  else "SCRATCH_2 does not replicate: a failed server loses data"}
    dras = fsx.data_repository_associations
    exporting = [d.file_system_path for d in dras if d.auto_export]
    ck = spec.checkpoints
    if ck is not None and ck.tier != "managed":  # the deployed choice: the checkpoint directory's association, or none
        exporting = [d.file_system_path for d in dras if ck.export_to_s3 and "NEW" in d.auto_export
                     and (ck.directory + "/").startswith(d.file_system_path.rstrip("/") + "/")]
    s3: Dict[str, Any] = {"target": "S3 (data repository association)", "available": bool(dras)}
    if not dras:
        s3["reason"] = "no data repository association links FSx to S3"
        return [fsx_target, s3]
    both = "max(size / min(FSx, clients), 2 x size / FSx throughput)"
    through = max(size / rate, 2 * size / ceiling)
    if exporting:
        s3["write"] = fig(through, "s", both, **inputs)
        s3["write_steps"] = _steps(through, step)
        s3["exported_from"] = exporting
    else:
        s3["write_reason"] = "no association has auto_export: checkpoints stay on FSx unless exported by a task"
    s3["restore"] = fig(through, "s", both + " (lazy import, then read)", **inputs)
    s3.update(durable=True, unverified=True, note="export and import run through the file servers (assumption)")
    return [fsx_target, s3]


def data_path(step: Step, spec: Any, bytes_per_token: float, group: Any = None) -> Dict[str, Any]:
    """Tokens per second the input pipeline must sustain at the step bound, against FSx and the S3 store."""
    tps = step.tokens_per_s
    need = fig(tps * bytes_per_token, "bytes/s", "tokens per step / step bound x bytes per token",
               tokens_per_step=step.tokens, step_bound_s=step.bound_s, bytes_per_token=bytes_per_token)
    out: Dict[str, Any] = {"tokens_per_s": fig(tps, "tokens/s", "tokens per step / step bound", tokens_per_step=step.tokens,
                                               step_bound_s=step.bound_s), "bytes_per_s": need}
    found = s3_store.section(spec)
    if group is not None and (found is not None or spec.storage.fsx is not None):
        out["s3"] = s3_store.stream(val(need), storage_facts(), client_bytes_per_s(group, False),
                                    s3_store.express(found))
        out["s3"]["comparison"] = found is None
    ceiling = fsx_bytes_per_s(spec)
    if ceiling is None:
        out.update(fsx=None, delivers=None, note="no FSx in the spec: the data path is not checked against FSx")
        return out
    out["fsx"] = fig(ceiling, "bytes/s", "capacity TiB x MB/s per TiB", capacity_gib=spec.storage.fsx.storage_capacity_gib)
    out["share_of_fsx"] = val(need) / ceiling
    out["delivers"] = val(need) <= ceiling
    return out

"""The spec's checkpoint tier as deployed (its `checkpoints` section): what one checkpoint blocks training for, when it
is durable, what a restart on a replaced node reads back, whether `keep` checkpoints fit where they go, and what
checkpointing costs per hour and per failure.

- the shared file system's tier: the ranks write to it; durable once written; a restart reads it.
- nvme: the ranks write to their node's NVMe (training goes on), then the copy to the shared file system runs; durable
  after both; a replaced node's NVMe is empty, so a restart reads the shared file system, never the NVMe.
- a tier another store offers (s3: Mountpoint for Amazon S3): the ranks write straight to it; durable once every file
  is closed; a restart reads it (the store's figures.py). The store says what fits on it (S3 holds any amount) and, in
  its notes, what a job must do differently.
- managed: HyperPod copies each GPU's shard to host memory over its PCIe link and replicates it to a neighbouring
  node; a replaced node reads its shard back from that neighbour over the network. Persisting to S3 runs on the
  library's own schedule and is not modelled. Rates in data/storage.json, unverified: times are lower bounds.

Failures come at random, so on average half an interval of work is lost, plus the time a checkpoint takes to become
durable, plus the restore: ``lost per failure = interval / 2 + (durable - blocking) + restore``. The time blocked
writing is ``blocking / (interval + blocking)`` of the run.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from fmcluster.planner.figures import GB, fig, val
from fmcluster.planner.stores import file_system_figures, stores
from fmcluster.platforms.storage.instance_nvme.tier import NVME

MANAGED = "managed"

MIB = 2**20
GIB = 2**30
# Checkpoint copies a node keeps in its memory under the managed tier: its own shard and a neighbour's replica
# (AWS: "automatically replicates data across adjacent compute nodes"; how many replicas is unverified).
MANAGED_COPIES_PER_NODE = 2


def managed_target(size: float, group: Any, facts: Dict[str, Any]) -> Dict[str, Any]:
    """Writing to and restoring from HyperPod's memory tier, as a target like the others."""
    t = group.instance
    link = facts["host_link_gbytes_per_s_per_gpu"] * GB
    gpus = group.count * t.gpus
    per_node = size / group.count
    network = (t.efa_gbps if group.efa_enabled else t.network_gbps) / 8 * GB
    write = fig(size / (gpus * link), "s", "size / (GPUs x GPU-to-host link)", size=size, gpus=gpus,
                link_bytes_per_s=link)
    replicate = fig(per_node / network, "s", "shard per node / node network", shard_per_node=per_node,
                    network_bytes_per_s=network)
    restore = fig(per_node / network + per_node / (t.gpus * link), "s",
                  "shard per node / node network (from the neighbour's replica) + shard per node / (GPUs x link)",
                  shard_per_node=per_node, network_bytes_per_s=network, gpus_per_node=t.gpus, link_bytes_per_s=link)
    return {"target": "HyperPod memory tier", "available": True, "write": write, "replicate": replicate,
            "restore": restore, "durable": False, "unverified": True,
            "note": "in host memory, replicated to a neighbouring node; persisted to S3 on the library's schedule"}


def chosen_tier(size: float, group: Any, spec: Any, targets: List[Dict[str, Any]], facts: Dict[str, Any],
                usd_per_hour: Optional[float]) -> Optional[Dict[str, Any]]:
    """The figures of the spec's tier, or None when the spec has no `checkpoints` section."""
    ck = spec.checkpoints
    if ck is None:
        return None
    by = {t["target"]: t for t in targets}
    interval = ck.interval_minutes * 60.0
    shared = file_system_figures(spec)
    short = shared[1].short if shared else "a shared file system"
    fs = by.get(shared[1].target, {}) if shared else {}  # the shared file system's own target, and its export
    exported = by.get(shared[1].export_target, {}) if shared else {}
    nvme = by.get(NVME.title, {})
    store = next((t for t in targets if t.get("store_tier") == ck.tier), None)  # a store's own tier, where planned
    direct = False
    if ck.tier == MANAGED:
        mem = managed_target(size, group, facts["managed_memory_tier"])
        blocking, durable = val(mem["write"]), val(mem["write"]) + val(mem["replicate"])
        restore, reads = val(mem["restore"]), "a neighbour's replica in host memory"
    elif ck.tier == NVME.name:
        if not nvme.get("available") or not fs.get("available"):
            return {"tier": ck.tier, "available": False,
                    "reason": nvme.get("reason") or fs.get("reason") or f"no instance NVMe or {short}"}
        blocking, durable = val(nvme["write"]), val(nvme["write"]) + val(fs["write"])
        restore, reads = val(fs["restore"]), f"{short} (a replaced node's NVMe is empty)"
    elif store is not None or ck.tier in by_use_tiers(spec):
        if store is None or not store.get("available") or store.get("comparison"):
            return {"tier": ck.tier, "available": False,
                    "reason": (store or {}).get("reason") or f"no writable {ck.tier.upper()} store"}
        blocking = durable = val(store["write"])
        restore, reads = val(store["restore"]), store["target"]
    else:  # the shared file system's own tier
        direct = True
        blocking = durable = val(fs["write"])
        restore, reads = val(fs["restore"]), short
    lost = interval / 2 + (durable - blocking) + restore
    out: Dict[str, Any] = {
        "tier": ck.tier, "available": True, "interval_minutes": ck.interval_minutes, "keep": ck.keep,
        "restore_reads": reads,
        "blocking": fig(blocking, "s", "the tier's write time (training waits for it)", tier=ck.tier),
        "durable_after": fig(durable, "s", "blocking + the copy to the durable tier", blocking=blocking),
        "restore": fig(restore, "s", f"read back from {reads}", tier=ck.tier),
        "overhead": fig(blocking / (interval + blocking), "fraction", "blocking / (interval + blocking)",
                        blocking=blocking, interval_s=interval),
        "lost_per_failure": fig(lost / 3600, "h", "(interval / 2 + (durable - blocking) + restore) / 3600",
                                interval_s=interval, durable_s=durable, blocking_s=blocking, restore_s=restore),
        "fits": fits(size, group, spec),
        "unverified": not direct,
    }
    if store is not None:
        from fmcluster.spec.checkpoints import tier_store

        out["write_bound"], out["restore_bound"] = store["write_bound"], store["restore_bound"]
        found = tier_store(spec)
        out["notes"] = found[1].checkpoint_notes() if found is not None else []
    if (direct or ck.tier == NVME.name) and ck.export_to_s3 and "write" in exported:
        start = val(nvme["write"]) if ck.tier == NVME.name else 0.0
        out["in_s3_after"] = fig(start + val(exported["write"]), "s", f"the NVMe write (nvme) + the {short} write and its "
                                 "export through the data repository association", start_s=start)
    if usd_per_hour is not None:
        out["usd_per_hour"] = fig(val(out["overhead"]) * usd_per_hour, "USD/h", "overhead x USD/h of the job",
                                  usd_per_hour=usd_per_hour)
        out["usd_per_failure"] = fig(val(out["lost_per_failure"]) * usd_per_hour, "USD",
                                     "lost hours per failure x USD/h of the job", usd_per_hour=usd_per_hour)
    return out


def by_use_tiers(spec: Any) -> List[str]:
    """The checkpoint tiers the stores other than the shared file system offer (s3)."""
    return [s.settings.checkpoint_tier for s in spec.stores if s.settings is not None
            and not s.settings.shared_file_system and s.settings.checkpoint_tier]


def fits(size: float, group: Any, spec: Any) -> List[Dict[str, Any]]:
    """Whether `keep` checkpoints fit each place the tier puts them (a store says what fits on it)."""
    ck, t = spec.checkpoints, group.instance
    found: List[Dict[str, Any]] = []
    per_node = size / group.count
    if ck.tier == MANAGED:
        have = ck.memory_percent / 100 * t.memory_mib * MIB
        need = MANAGED_COPIES_PER_NODE * per_node
        found.append({"where": "host memory per node", "need_bytes": need, "have_bytes": have, "fits": need <= have,
                      "formula": f"{MANAGED_COPIES_PER_NODE} copies x size / nodes vs memory_percent x node memory "
                                 "(replicas per node unverified)"})
        return found
    if ck.tier in by_use_tiers(spec):  # the store the tier writes to
        return [f for s, figures, section in stores(spec) if section is not None
                and s.settings.checkpoint_tier == ck.tier for f in figures.checkpoint_fits(spec, section, ck.keep * size)]
    shared = file_system_figures(spec)
    if shared is not None and shared[2] is not None:
        found += shared[1].checkpoint_fits(spec, shared[2], ck.keep * size)
    node = NVME.size(t)
    if ck.tier == NVME.name and node is not None:
        have = node.bytes
        need = ck.keep * per_node
        found.append({"where": "instance NVMe per node", "need_bytes": need, "have_bytes": have, "fits": need <= have,
                      "formula": "keep x size / nodes vs the node's instance store (shared with container images)"})
    return found

"""Layer 6: storage: the profile's shared mounts, mounted as it says (path, fstype, source, access), and the instance
NVMe. Each store's own checks (answering, client state) sit in its node folder's checks.py, which also says what
else its mounts need and the remedy (a MountKind); the validator imports them by layout (fmcluster/runtime/stores.py)."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from ..node import ProbeError
from ..probes.filesystem import size_bytes
from ..probes.mounts import mounts
from .registry import Ctx, Result, bad, check, fstype_of, has_instance_store, ok, owner_of

MOUNT_REMEDY = "mount the file system (the boot log says why its mount failed)"


def _expected(m: Dict[str, Any]) -> str:
    source = f" from {m['source']}" if m.get("source") else ""
    read_only = m.get("read_only")
    access = "" if not isinstance(read_only, bool) else ", read-only" if read_only else ", read-write"
    return f"{m['path']} ({fstype_of(m)}{source}{access})"


def _mount_problem(ctx: Ctx, m: Dict[str, Any], got: Tuple[str, str, str]) -> str:
    """What is wrong with a mount /proc/mounts shows at the profile's path ("" when nothing)."""
    path, fstype = m["path"], fstype_of(m)
    if fstype and got[1] != fstype:
        return f"{path} is {got[1]}, expected {fstype}"
    if m.get("source") and got[0] != m["source"]:
        return f"{path} is {got[1]} from {got[0]}, expected {m['source']}"
    owner = owner_of(m)
    problem = owner.problem(ctx, m, got) if owner and owner.problem else ""
    if problem:
        return problem
    if isinstance(m.get("read_only"), bool):
        mounted_ro = "ro" in got[2].split(",")
        if mounted_ro != m["read_only"]:
            return f"{path} is mounted {'read-only' if mounted_ro else 'read-write'}, expected " \
                   f"{'read-only' if m['read_only'] else 'read-write'}"
    return ""


@check("storage.mounts", "storage", applies=lambda p: bool(p.mounts), title="Shared file systems mounted")
def shared_mounts(ctx: Ctx) -> Result:
    table = mounts(ctx)
    problems, seen, remedies = [], [], []
    for m in ctx.profile.mounts:
        path = m["path"]
        got = table.get(path)
        problem = (f"{path} not mounted" if m.get("required", True) else "") if got is None else _mount_problem(ctx, m, got)
        if problem:
            problems.append(problem)
            owner = owner_of(m)
            remedy = owner.remedy if owner else MOUNT_REMEDY
            if remedy not in remedies:
                remedies.append(remedy)
        elif got is not None:
            seen.append(f"{path} ({got[1]} {got[0]})")
    expected = ", ".join(_expected(m) for m in ctx.profile.mounts)
    if problems:
        return bad("; ".join(problems + seen), expected, "; ".join(remedies))
    return ok(", ".join(seen), expected)


# The file system on the instance NVMe is a few percent smaller than its disks (ext4's inode tables and journal, xfs's
# log and allocation-group headers), and a disk missing from an 8-disk RAID0 takes 12.5% away: below this share of the
# catalog's size the tier is not whole. Above the ceiling it is not the instance store at all.
NVME_SIZE_FLOOR = 0.9
NVME_SIZE_CEILING = 1.05


@check("storage.instance_store", "storage", applies=has_instance_store,
       title="Instance NVMe present, mounted and of the catalog's size")
def instance_store(ctx: Ctx) -> Result:
    want = int(ctx.profile.fact("nvme_disks"))
    want_gb = int(ctx.profile.fact("nvme_gb", 0) or 0)
    path = str(ctx.profile.instance_store)
    disks = []
    for c in ctx.node.listdir("/sys/class/nvme"):
        model = (ctx.node.read_or(f"/sys/class/nvme/{c}/model") or "").strip()
        if "Instance Storage" in model:
            disks.append(c)
    got = mounts(ctx).get(path)
    observed = f"{len(disks)} instance-store NVMe; {path} " + (f"mounted ({got[1]} {got[0]})" if got else "not mounted")
    expected = f"{want} NVMe, {path} mounted"
    if len(disks) != want:
        return bad(observed, expected, "an instance-store disk is missing: stop/start the instance")
    if got is None:
        return bad(observed, expected, f"assemble the disks (LVM/RAID0) and mount them on {path}")
    if not want_gb:  # a check that cannot run is no pass
        raise ProbeError("the profile's facts give nvme_disks but no nvme_gb: the size cannot be checked")
    size = size_bytes(ctx, path)
    observed += f", {size / 1e9:,.0f} GB"
    expected += f", {NVME_SIZE_FLOOR:.0%}-{NVME_SIZE_CEILING:.0%} of the catalog's {want_gb:,} GB"
    if not NVME_SIZE_FLOOR * want_gb * 1e9 <= size <= NVME_SIZE_CEILING * want_gb * 1e9:
        return bad(observed, expected, f"{path} is not the whole instance store: `lsblk` shows which disks it spans; "
                   "reassemble it over all of them (its data is scratch) or replace the node")
    return ok(observed, expected)

"""Mountpoint for Amazon S3 on the node, for the boot validator: its mounts (the mount-s3 FUSE daemon's, with their
remedy) and whether they answer (storage.s3_answers). The validator imports this module by layout
(fmcluster/runtime/stores.py); standard library and the runtime only."""

from __future__ import annotations

from typing import Any, Dict, List

from fmcluster.runtime.checks.registry import Ctx, MountKind, Result, bad, check, mount_kind, ok, skip
from fmcluster.runtime.node import ProbeError
from fmcluster.runtime.probes.mounts import mounts

# Mountpoint for Amazon S3's FUSE session names itself so, with no subtype: /proc/mounts says
# "mountpoint-s3 <path> fuse ro,nosuid,nodev,noatime,..." (mountpoint-s3-fs/src/fuse/config.rs).
MOUNTPOINT_S3 = "mountpoint-s3"
S3_REMEDY = ("mount the bucket (the boot log says whether mount-s3 installed and mounted; `journalctl -t mount-s3` "
             "says why Mountpoint stopped, often the node role's S3 or KMS permissions); `mount <path>` mounts it "
             "from its fstab line")

mount_kind(MountKind("fuse", S3_REMEDY, owns=lambda m: m.get("source") == MOUNTPOINT_S3))


def _s3_mounts(profile: Any) -> List[Dict[str, Any]]:
    return [m for m in profile.mounts if m.get("source") == MOUNTPOINT_S3]


@check("storage.s3_answers", "storage", level="standard", applies=lambda p: bool(_s3_mounts(p)),
       title="Mountpoint for Amazon S3 answers (statfs through its FUSE daemon, under a timeout)")
def s3_answers(ctx: Ctx) -> Result:
    """statfs goes to the mount-s3 daemon without an S3 request: a daemon that died answers "Transport endpoint is
    not connected", a hung one times out."""
    table = mounts(ctx)
    problems, good = [], []
    for m in _s3_mounts(ctx.profile):
        path = str(m["path"])
        if table.get(path, ("", ""))[0] != MOUNTPOINT_S3:
            continue
        res = ctx.node.run(("stat", "--file-system", "--format=%T", path))
        if res.error:
            raise ProbeError(res.why())
        if res.rc != 0 or "fuse" not in res.stdout:
            problems.append(f"{path}: {res.why() if res.rc != 0 else 'statfs says ' + res.stdout.strip()[:60]}")
        else:
            good.append(path)
    if not good and not problems:
        return skip("no Mountpoint for Amazon S3 mount (see storage.mounts)")
    if problems:
        return bad("; ".join(problems), "every mount answers",
                   "the mount-s3 daemon stopped or hangs: `journalctl -t mount-s3` says why; `umount -l <path>` then "
                   "`mount <path>` remounts it from fstab")
    return ok(", ".join(good), "every mount answers")

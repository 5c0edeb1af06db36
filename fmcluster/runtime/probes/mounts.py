"""Mount probes: the /proc/mounts table, the mount holding a path, and symlinks followed without touching network
file systems (nothing here stats a mount point: a hung server would hang the validator)."""

from __future__ import annotations

import os
from typing import Dict, List, Tuple

from ..context import Ctx
from ..mounts import parse

# never readlink or stat these: on a hung server the call sleeps uninterruptibly (D state) and no timeout frees it.
# A store's node checks add its own network file system's type (fmcluster/runtime/stores.py).
NETWORK_FS: List[str] = ["nfs", "nfs4", "cifs", "smb3", "ceph", "glusterfs", "9p", "beegfs", "gpfs", "efs"]


def mounts(ctx: Ctx) -> Dict[str, Tuple[str, str, str]]:
    """mount point -> (source, fstype, options) from /proc/mounts (never stat a network mount here)."""
    def probe() -> Dict[str, Tuple[str, str, str]]:
        return {m.mount_point: (m.source, m.fstype, m.options) for m in parse(ctx.node.read("/proc/mounts"))}
    return ctx.memo("mounts", probe)


def mount_of(ctx: Ctx, path: str) -> Tuple[str, Tuple[str, str, str]]:
    """The mount holding path: longest mount-point prefix in /proc/mounts (nothing is stat'ed)."""
    table = mounts(ctx)
    best = "/"
    for mp in table:
        if (path == mp or path.startswith(mp.rstrip("/") + "/")) and len(mp) > len(best):
            best = mp
    return best, table.get(best, ("?", "?", ""))


def resolve(ctx: Ctx, path: str) -> str:
    """path with symlinks followed (under --root), never reading a link on a network file system."""
    parts = [p for p in path.split("/") if p]
    done = ""
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in (".", ".."):
            done = done.rsplit("/", 1)[0] if part == ".." else done
            continue
        cand = f"{done}/{part}"
        fstype = mount_of(ctx, cand)[1][1]
        if fstype in NETWORK_FS or fstype.startswith("fuse"):
            return "/".join([cand] + parts)
        try:
            target = os.readlink(ctx.node.path(cand))
        except OSError:
            done = cand
            continue
        hops += 1
        if hops > 16:
            return "/".join([cand] + parts)
        parts = [p for p in target.split("/") if p] + parts
        if target.startswith("/"):
            done = ""
    return done or "/"

"""The size of a local file system as statvfs(3) reports it, read through df (GNU coreutils) under the tool timeout, so
fixtures and nodes answer the same way. Local file systems only: a network mount's server can hang statfs."""

from __future__ import annotations

from ..context import Ctx
from ..node import ProbeError


def size_bytes(ctx: Ctx, path: str) -> int:
    """Bytes of the file system mounted at `path` (f_blocks x f_frsize: ``df -B1 --output=size,target``);
    ProbeError when df fails, prints garbage, or answers for another mount point."""
    out = ctx.node.run(["df", "-B1", "--output=size,target", path]).require()
    lines = [line.split(None, 1) for line in out.splitlines()[1:] if line.strip()]
    if len(lines) != 1 or len(lines[0]) != 2 or not lines[0][0].isdigit():
        raise ProbeError(f"df {path}: unexpected output {out.strip()[:200]!r}")
    size, target = lines[0]
    if target.strip() != path:
        raise ProbeError(f"df {path}: answered for {target.strip()}, not the mount point itself")
    return int(size)

"""Files under ``--root``: every node-side reader (the validator's probes, the stores' mount helpers, the
collectors' configuration, the HyperPod lifecycle) resolves and reads paths the same way, so tests run each on a
fixture tree. Standard library only."""

from __future__ import annotations

import os

READ_LIMIT = 4 << 20  # bytes: no node file we read is larger; a runaway one is cut, never held whole in memory


def under(root: str, path: str) -> str:
    """`path` (absolute, as on the node) inside `root` (``/`` or empty: the node itself)."""
    if root in ("", "/"):
        return path
    return os.path.join(root, path.lstrip("/"))


def read_text(root: str, path: str, limit: int = READ_LIMIT) -> str:
    """At most `limit` bytes of the file, decoded as UTF-8 (undecodable bytes replaced); OSError when unreadable."""
    with open(under(root, path), "rb") as fh:
        return fh.read(limit).decode("utf-8", errors="replace")

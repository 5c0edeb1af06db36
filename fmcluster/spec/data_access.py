"""Which parts of the data bucket a cluster's nodes may change, from the spec's associations and checkpoints.

Nodes read the whole bucket (datasets may be anywhere in it). They write only where S3 is the source of a data
repository association (it imports into the file system: datasets staged from the nodes), and delete only where S3 is
its only source: an association that exports is the file system's durable copy, written and pruned by FSx itself, and
the checkpoint prefix keeps the run's history, which the bucket's lifecycle rules retire rather than any node
(docs/checkpoints.md, "Who may change the data bucket"). Another bucket's associations (`repository_path`) grant
nothing: that bucket's owner decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple


@dataclass(frozen=True)
class NodeDataAccess:
    """Prefixes of the data bucket (relative, ending in /) where nodes may put objects, and where they may delete."""

    write: Tuple[str, ...]
    delete: Tuple[str, ...]


def _overlap(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def checkpoint_prefix(spec: Any) -> Optional[str]:
    """The data bucket prefix the spec's checkpoints persist to: the managed tier's directory, or the part of the
    bucket the association covering a file tier's directory maps it to (None: no section, a store's tier, or no such
    association)."""
    ck = spec.checkpoints
    if ck is None:
        return None
    if ck.tier == "managed":
        return ck.directory.lstrip("/") + "/"
    if ck.tier not in ("fsx", "nvme"):  # a store's tier (s3): its own bucket, not the data bucket
        return None
    fsx = spec.storage.fsx
    for dra in fsx.data_repository_associations if fsx is not None else []:
        root = dra.file_system_path.rstrip("/") + "/"
        if dra.data_bucket_prefix is not None and (ck.directory + "/").startswith(root):
            return str(dra.data_bucket_prefix) + (ck.directory + "/")[len(root):]
    return None


def node_data_access(spec: Any) -> NodeDataAccess:
    fsx = spec.storage.fsx
    ours = [d for d in (fsx.data_repository_associations if fsx is not None else []) if d.data_bucket_prefix is not None]
    checkpoints = checkpoint_prefix(spec)
    write = tuple(d.data_bucket_prefix for d in ours if d.auto_import)
    delete = tuple(d.data_bucket_prefix for d in ours if d.auto_import and not d.auto_export
                   and not (checkpoints is not None and _overlap(d.data_bucket_prefix, checkpoints)))
    return NodeDataAccess(write=write, delete=delete)

"""Which parts of the data bucket a cluster's nodes may change, from what the stores link there and the checkpoints.

Nodes read the whole bucket (datasets may be anywhere in it). They write only where S3 is the source of a store's
directory (`BucketLink.imports`: datasets staged from the nodes), and delete only where S3 is its only source: a
directory the store exports is the store's durable copy, written and pruned by the store itself, and the checkpoint
prefix keeps the run's history, which the bucket's lifecycle rules retire rather than any node (docs/checkpoints.md,
"Who may change the data bucket"). What a store links in another bucket grants nothing: that bucket's owner decides.
Each store section says what it links (`StoreSettings.data_bucket_links`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from fmcluster.spec.checkpoints import MANAGED, durable_store


@dataclass(frozen=True)
class NodeDataAccess:
    """Prefixes of the data bucket (relative, ending in /) where nodes may put objects, and where they may delete."""

    write: Tuple[str, ...]
    delete: Tuple[str, ...]


def _overlap(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def checkpoint_prefix(spec: Any) -> Optional[str]:
    """The data bucket prefix the spec's checkpoints persist to: the managed tier's directory, or the part of the
    bucket a link of the store that keeps them maps their directory to (None: no section, or no such link, e.g. a
    store that is a bucket of its own)."""
    ck = spec.checkpoints
    if ck is None:
        return None
    if ck.tier == MANAGED:
        return ck.directory.lstrip("/") + "/"
    store = durable_store(spec)
    for link in store[1].data_bucket_links() if store is not None else []:
        root = link.directory.rstrip("/") + "/"
        if (ck.directory + "/").startswith(root):
            return link.prefix + (ck.directory + "/")[len(root):]
    return None


def node_data_access(spec: Any) -> NodeDataAccess:
    links = [link for _, section in spec.storage.store_sections() for link in section.data_bucket_links()]
    checkpoints = checkpoint_prefix(spec)
    write = tuple(link.prefix for link in links if link.imports)
    delete = tuple(link.prefix for link in links if link.imports and not link.exports
                   and not (checkpoints is not None and _overlap(link.prefix, checkpoints)))
    return NodeDataAccess(write=write, delete=delete)

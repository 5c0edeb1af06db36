"""What `fmcluster status` says of one resource: an `Item` (with its children) and the words for its health."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

OK, PENDING, WARN, BAD, UNKNOWN, ABSENT = "ok", "pending", "warn", "bad", "unknown", "absent"


@dataclass
class Item:
    type: str
    name: str
    state: str
    health: str
    detail: str = ""
    logical_id: str = ""
    children: List[Item] = field(default_factory=list)


def health(state: str, ok: set, pending: set) -> str:
    if state in ("?", ""):
        return UNKNOWN
    if state in ok:
        return OK
    if state in pending:
        return PENDING
    return BAD

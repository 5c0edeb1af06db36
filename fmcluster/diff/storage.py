"""What the registered stores say of changes to their resources (each store's `ChangeRules`, in its folder), as
findings: the types that hold data, the replacements their services refuse, the updates that interrupt them
(docs/changes.md, "Shared storage")."""

from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from fmcluster.diff.findings import CONTROL_PLANE, DATA, Finding
from fmcluster.platforms.storage import ChangeRules, ResourceEdit
from fmcluster.platforms.storage.forms import Judgement


@lru_cache(maxsize=1)
def _rules() -> Tuple[ChangeRules, ...]:
    from fmcluster import registry

    return tuple(store.changes() for store in registry.STORES)


def _finding(where: str, j: Judgement) -> Finding:
    return Finding(DATA if j.data else CONTROL_PLANE, where, j.text, sources=list(j.sources), fails=j.fails)


def stateful_types() -> Tuple[str, ...]:
    """Resource types that hold a store's data."""
    return tuple(t for r in _rules() for t in r.stateful)


def create_only() -> Mapping[Tuple[str, Tuple[str, ...]], str]:
    """The replacing property paths the stores document beyond the provider schemas, with their pages."""
    return {k: v for r in _rules() for k, v in r.create_only.items()}


def modified(c: ResourceEdit) -> List[Finding]:
    return [_finding(c.where, j) for r in _rules() for j in r.modified(c)]


def replaced(c: ResourceEdit) -> Optional[Finding]:
    return next((_finding(c.where, j) for r in _rules() for j in [r.replaced(c)] if j is not None), None)


def refused(changes: Sequence[ResourceEdit]) -> Dict[str, Finding]:
    """The replacements a store's service refuses, by place."""
    return {where: _finding(where, j) for r in _rules() for where, j in r.refused(changes).items()}

"""The orchestrator kinds fmcluster knows: adding a kind is one folder and one line here.

`register` adds a kind at run time (tests prove the seam with a kind defined inside a test); the spec's
``orchestrator`` union follows whatever is registered (`fmcluster.spec.loading.spec_model`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List

from fmcluster.orchestrators import eks, hyperpod, hyperpod_eks, none, parallelcluster, pcs
from fmcluster.orchestrators.kind import OrchestratorKind

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

BUILT_IN: List[OrchestratorKind] = [none.KIND, pcs.KIND, hyperpod.SLURM, parallelcluster.KIND, eks.KIND,
                                    hyperpod_eks.KIND]

_kinds: Dict[str, OrchestratorKind] = {k.name: k for k in BUILT_IN}


def kinds() -> List[OrchestratorKind]:
    return list(_kinds.values())


def names() -> List[str]:
    return list(_kinds)


def kind_named(name: str) -> OrchestratorKind:
    try:
        return _kinds[name]
    except KeyError:
        raise KeyError(f"unknown orchestrator {name!r}; known: {', '.join(_kinds)}") from None


def kind_of(spec: ClusterSpec) -> OrchestratorKind:
    return kind_named(spec.orchestrator.type)


def register(kind: OrchestratorKind) -> None:
    if kind.name in _kinds:
        raise ValueError(f"orchestrator {kind.name!r} is already registered")
    _kinds[kind.name] = kind


def unregister(name: str) -> None:
    if name in {k.name for k in BUILT_IN}:
        raise ValueError(f"{name!r} is built in")
    _kinds.pop(name, None)

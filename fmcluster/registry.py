"""The composition root: the orchestrator kinds and the shared stores fmcluster knows, and the spec model they compose.

Adding a kind is one folder under ``fmcluster/orchestrators/`` and its line in the import and in `BUILT_IN` below;
deleting one is deleting the folder and those lines (tests/orchestrators/test_kind_deletion.py does it). `register`
adds a kind at run time (tests prove the seam with a kind defined inside a test). Everything that reads a spec goes
through `load_spec` / `parse_spec` here, so the spec package itself never lists the kinds.

A store is likewise one folder under ``fmcluster/platforms/storage/`` and its line in the import and in `STORES`; the
storage and cluster stacks are handed `stores()` by `fmcluster.app` (docs/architecture.md, "The storage seam").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Type, Union

from fmcluster.orchestrators import (
    eks,
    hyperpod_eks,
    hyperpod_slurm,
    none,
    parallelcluster,
    pcs,
)
from fmcluster.orchestrators.kind import OrchestratorKind
from fmcluster.platforms.storage import (
    Store,
    fsx_lustre,
    mountpoint_s3,
)
from fmcluster.spec import loading
from fmcluster.spec.cluster import ClusterSpec
from fmcluster.spec.loading import StoreSection

# The first is the default kind (a spec without ``orchestrator``).
BUILT_IN: List[OrchestratorKind[Any]] = [
    none.KIND,
    pcs.KIND,
    hyperpod_slurm.KIND,
    parallelcluster.KIND,
    eks.KIND,
    hyperpod_eks.KIND,
]

_kinds: Dict[str, OrchestratorKind[Any]] = {k.name: k for k in BUILT_IN}

# The shared stores, in the order the storage stack builds them and kinds receive their mounts.
STORES: List[Store] = [
    fsx_lustre.STORE,
    mountpoint_s3.STORE,
]


def kinds() -> List[OrchestratorKind[Any]]:
    return list(_kinds.values())


def names() -> List[str]:
    return list(_kinds)


def kind_named(name: str) -> OrchestratorKind[Any]:
    try:
        return _kinds[name]
    except KeyError:
        raise KeyError(f"unknown orchestrator {name!r}; known: {', '.join(_kinds)}") from None


def kind_of(spec: ClusterSpec) -> OrchestratorKind[Any]:
    return kind_named(spec.orchestrator.type)


def stores() -> List[Store]:
    return list(STORES)


def store_sections() -> List[StoreSection]:
    """The stores' own sections under the spec's ``storage``."""
    return [(s.spec_key, s.settings, s.summary) for s in STORES if s.settings is not None]


def register(kind: OrchestratorKind[Any]) -> None:
    if kind.name in _kinds:
        raise ValueError(f"orchestrator {kind.name!r} is already registered")
    _kinds[kind.name] = kind


def unregister(name: str) -> None:
    if name in {k.name for k in BUILT_IN}:
        raise ValueError(f"{name!r} is built in")
    _kinds.pop(name, None)


def spec_model() -> Type[ClusterSpec]:
    """The spec model of the kinds registered now."""
    return loading.spec_model(kinds(), store_sections(), STORES)


def parse_spec(data: Any) -> ClusterSpec:
    """Validate an already-parsed spec (a mapping); every failure is a `fmcluster.spec.SpecError`."""
    return loading.parse_spec(data, kinds(), store_sections(), STORES)


def load_spec(path: Union[str, Path]) -> ClusterSpec:
    """Read and validate a spec file; every failure is a `fmcluster.spec.SpecError`."""
    return loading.load_spec(path, kinds(), store_sections(), STORES)


def json_schema() -> Dict[str, Any]:
    return loading.json_schema(spec_model())


def store_preflight_checks(spec: ClusterSpec) -> List[Any]:
    """`fmcluster preflight`'s checks of every store the spec configures (`Store.preflight_checks`)."""
    return [check for store in STORES if store.section(spec) is not None for check in store.preflight_checks(spec)]


def status_describers() -> Dict[str, Any]:
    """Every kind's and store's status describers: `fmcluster status` describes what the deployed stacks hold, which
    may still be another kind's resources when the spec has switched orchestrators and is not deployed yet."""
    found: Dict[str, Any] = {}
    for kind in kinds():
        found.update(kind.status_describers())
    for store in STORES:
        found.update(store.status_describers())
    return found

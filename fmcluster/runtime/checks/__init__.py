"""The boot validator's checks, grouped by layer, each with the lowest level it runs at.

Each layer has its module, named as the layer (checks/hardware.py ... checks/exporters.py); a deep check lives in its
layer's module with level "deep"; a store's checks sit in its node folder's checks.py, imported after the layers'
(fmcluster/runtime/stores.py). Checks judge what the probes (fmcluster.runtime.probes) read from the node; they
import probes and the registry (checks/registry.py), never another check module; the probes never import the checks.
"""

from __future__ import annotations

from typing import Dict, List

from .registry import LAYERS, REGISTRY, STATUSES, Check, Ctx, Result, bad, check, ok, skip, warn
from .registry import LEVELS as LEVELS

__all__ = ["LAYERS", "LEVELS", "REGISTRY", "STATUSES", "Check", "Ctx", "Result", "all_checks", "bad", "check", "ok",
           "skip", "warn"]


def all_checks() -> List[Check]:
    # one module per layer, named as the layer; importing them registers their checks
    from ..stores import node_modules
    from . import (  # noqa: F401
        accelerator,
        communication,
        containers,
        distributed,
        exporters,
        framework,
        hardware,
        orchestrator,
        storage,
    )

    node_modules("checks")  # then each store's, found by layout

    seen: Dict[str, Check] = {}
    for c in REGISTRY:
        seen.setdefault(c.id, c)
    ordered = list(seen.values())
    return sorted(ordered, key=lambda c: (LAYERS.index(c.layer), LEVELS.index(c.level), ordered.index(c)))

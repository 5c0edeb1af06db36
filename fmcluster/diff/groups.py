"""Node groups as each orchestrator kind declares them in a template: one `NodeUnit` per group of like instances.

Each registered kind reads the resource types its nodes live in (`OrchestratorTraits.nodes.resource_types` and
`node_units`); a template may hold another kind's resources (a spec that switched orchestrators), so every kind is
asked, not only the spec's."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from fmcluster.spec.node_units import NodeUnit, Template, size_of

__all__ = ["NodeUnit", "Template", "node_types", "size_of", "units"]


def _readers() -> Mapping[str, Any]:
    """Resource type -> the first registered kind that reads it."""
    from fmcluster import registry

    found: Dict[str, Any] = {}
    for kind in registry.kinds():
        for resource_type in kind.nodes.resource_types:
            found.setdefault(resource_type, kind)
    return found


def node_types() -> Tuple[str, ...]:
    """Every resource type whose resources hold nodes, by the registered kinds."""
    return tuple(_readers())


def units(stack: str, template: Optional[Template]) -> Dict[str, NodeUnit]:
    """Every node group a stack template declares, by key."""
    resources = (template or {}).get("Resources", {})
    readers = _readers()
    out: Dict[str, NodeUnit] = {}
    for lid, r in resources.items():
        kind = readers.get(r.get("Type"))
        if kind is not None:
            out.update((u.key, u) for u in kind.node_units(stack, lid, r, resources))
    return out

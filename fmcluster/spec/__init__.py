"""The cluster spec: the one place user input is validated.

A spec is YAML the user writes (examples/*.yaml). `load_spec` turns it into a frozen
`ClusterSpec` or raises `SpecError` whose `problems` are one line each,
``field.path: what is wrong and what is allowed``. Unknown keys are errors so typos
never pass silently. Constructs trust a `ClusterSpec`; they re-validate nothing.

One module per section (network, node_group, storage, observability, validation); the
``orchestrator`` section belongs to each orchestrator kind (fmcluster/orchestrators/), whose
settings build on `fmcluster.spec.base`. The names below load on first use, so a kind can import
`fmcluster.spec.base` while the spec imports the kinds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_HOMES = {
    "SpecError": "base",
    "SCHEMA_URL": "cluster",
    "ClusterSpec": "cluster",
    "format_validation_error": "loading",
    "json_schema": "loading",
    "load_spec": "loading",
    "parse_spec": "loading",
    "spec_model": "loading",
    "ExistingVpc": "network",
    "Network": "network",
    "NewVpc": "network",
    "private_subnet_prefix": "network",
    "Capacity": "node_group",
    "NodeGroup": "node_group",
    "Placement": "node_group",
    "Observability": "observability",
    "DataRepositoryAssociation": "storage",
    "Fsx": "storage",
    "Storage": "storage",
    "Validation": "validation",
}
__all__ = [
    "Capacity",
    "ClusterSpec",
    "DataRepositoryAssociation",
    "ExistingVpc",
    "Fsx",
    "Network",
    "NewVpc",
    "NodeGroup",
    "Observability",
    "Placement",
    "SCHEMA_URL",
    "SpecError",
    "Storage",
    "Validation",
    "format_validation_error",
    "json_schema",
    "load_spec",
    "parse_spec",
    "private_subnet_prefix",
    "spec_model",
]

if TYPE_CHECKING:
    from fmcluster.spec.base import SpecError
    from fmcluster.spec.cluster import SCHEMA_URL, ClusterSpec
    from fmcluster.spec.loading import format_validation_error, json_schema, load_spec, parse_spec, spec_model
    from fmcluster.spec.network import ExistingVpc, Network, NewVpc, private_subnet_prefix
    from fmcluster.spec.node_group import Capacity, NodeGroup, Placement
    from fmcluster.spec.observability import Observability
    from fmcluster.spec.storage import DataRepositoryAssociation, Fsx, Storage
    from fmcluster.spec.validation import Validation


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'fmcluster.spec' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fmcluster.spec.{home}"), name)

"""The stores' node code, found by layout and never by name: every ``platforms/storage/<store>/node/`` folder.

The runtime archive carries each such folder below the runtime (fmcluster/constructs/runtime_archive.py), so on a
node it imports as ``fmcluster.runtime.platforms.storage.<store>.node`` (namespace packages under this one); in the
repository it is the folder at its package path. A store's folder may hold ``checks.py`` (the validator imports it,
which registers its checks), ``lifecycle.py`` (its entry in HyperPod's lifecycle parameters: ``KEY``, ``check``,
``answers``) and the tools its boot lines run. Standard library only."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Tuple

RUNTIME_DIR = Path(__file__).resolve().parent
STORES = ("platforms", "storage")
NODE = "node"


def node_packages(runtime_dir: Path = RUNTIME_DIR) -> List[Tuple[str, Path]]:
    """(package name, folder) of every store's node folder, in store order."""
    shipped = runtime_dir.joinpath(*STORES)
    if shipped.is_dir():  # an unpacked archive: the folders sit below the runtime
        base, prefix = shipped, ".".join(("fmcluster", "runtime", *STORES))
    else:  # the repository: at their package path
        base, prefix = runtime_dir.parent.joinpath(*STORES), ".".join(("fmcluster", *STORES))
    return [(f"{prefix}.{d.parent.name}.{NODE}", d) for d in sorted(base.glob(f"*/{NODE}")) if d.is_dir()]


def node_modules(leaf: str, runtime_dir: Path = RUNTIME_DIR) -> List[ModuleType]:
    """Every store's ``node/<leaf>.py``, imported."""
    return [importlib.import_module(f"{name}.{leaf}") for name, folder in node_packages(runtime_dir)
            if (folder / f"{leaf}.py").is_file()]


def node_module_name(leaf: str, runtime_dir: Path = RUNTIME_DIR) -> str:
    """The one store module named `leaf` (a tool run by an earlier name); LookupError when none or several."""
    found = [f"{name}.{leaf}" for name, folder in node_packages(runtime_dir) if (folder / f"{leaf}.py").is_file()]
    if len(found) != 1:
        raise LookupError(f"{len(found)} stores' node folders hold {leaf}.py (one expected): {found}")
    return found[0]


def lifecycle_entries(params: Dict[str, Any], runtime_dir: Path = RUNTIME_DIR) -> List[Tuple[ModuleType, Any]]:
    """(the store's lifecycle module, its entry in `params` or None) for every store with one."""
    return [(m, params.get(m.KEY)) for m in node_modules("lifecycle", runtime_dir)]


def lifecycle_keys(runtime_dir: Path = RUNTIME_DIR) -> List[str]:
    """The stores' entry keys in the lifecycle parameters, in store order (contract.with_store_entries)."""
    return [m.KEY for m in node_modules("lifecycle", runtime_dir)]

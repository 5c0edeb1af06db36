"""FSx for Lustre's entry in HyperPod's lifecycle parameters (``fsx``: the store's `lifecycle_key`, its mount's
lifecycle form), as the node reads it: checked by node_setup's parameters, answered to the lifecycle scripts as
``fsx*`` lines (node_setup's identity). The runtime finds this module by layout (fmcluster/runtime/stores.py)."""

from __future__ import annotations

from typing import Any, Dict

from fmcluster.runtime.node_setup.files import SetupError, clean

KEY = "fsx"
ENTRY_KEYS = ("dns_name", "mount_name", "mount_point", "efa")


def check(entry: Any) -> None:
    """The entry, or null (no file system the nodes mount); SetupError on anything else."""
    if entry is None:
        return
    if not isinstance(entry, dict):
        raise SetupError("fsx must be an object or null")
    for key in ("dns_name", "mount_name", "mount_point"):
        clean(entry.get(key), f"fsx.{key}")
    if not entry["mount_point"].startswith("/") or entry["mount_point"] == "/":
        raise SetupError(f"fsx.mount_point must be an absolute path below /, got {entry['mount_point']!r}")
    if not isinstance(entry.get("efa", False), bool):
        raise SetupError("fsx.efa must be true or false")


def answers(entry: Any, efa: bool) -> Dict[str, str]:
    """What the lifecycle scripts read (lifecycle.sh entry_step_fsx); `efa`: this node has EFA."""
    fsx = entry or {}
    return {
        "fsx": "1" if fsx else "0",
        "fsx_dns_name": fsx.get("dns_name", ""),
        "fsx_mount_name": fsx.get("mount_name", ""),
        "fsx_mount_point": fsx.get("mount_point", ""),
        # LNet over EFA only where this node has EFA; others reach an EFA-enabled file system over TCP
        "fsx_efa": "1" if fsx.get("efa") and efa else "0",
    }

"""Check registry: checks grouped by layer, each with the lowest level it runs at.

Each layer has its module, named as the layer (checks/hardware.py ... checks/exporters.py); a deep check lives in its
layer's module with level "deep". Checks judge what the probes (fmcluster.runtime.probes) read from the node; they
import probes and this registry, never another check module.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional

from ..probes import Node
from ..profile import LEVELS, NodeProfile

LAYERS = (
    "hardware",       # 1 hardware and drivers
    "accelerator",    # 2 accelerator runtime and libraries
    "communication",  # 3 EFA, libfabric, aws-ofi-nccl, GPUDirect RDMA, GDRCopy
    "framework",      # 4 ML framework
    "distributed",    # 5 distributed frameworks (NCCL, version rules, collectives)
    "storage",        # 6 shared file systems, instance NVMe
    "containers",     # 7 container images and data (docker, containerd, enroot)
    "orchestrator",   # 8 node agent, orchestrator's view of the node
    "exporters",      # 9 metrics endpoints
)
STATUSES = ("pass", "fail", "warn", "skip", "error")


class Result:
    __slots__ = ("status", "observed", "expected", "remedy", "detail")

    def __init__(self, status: str, observed: Any = None, expected: Any = None, remedy: str = "",
                 detail: str = "") -> None:
        assert status in STATUSES, status
        self.status = status
        self.observed = observed
        self.expected = expected
        self.remedy = remedy
        self.detail = detail


def ok(observed: Any = None, expected: Any = None, detail: str = "") -> Result:
    return Result("pass", observed, expected, "", detail)


def bad(observed: Any, expected: Any, remedy: str, detail: str = "") -> Result:
    return Result("fail", observed, expected, remedy, detail)


def warn(observed: Any, expected: Any, remedy: str, detail: str = "") -> Result:
    return Result("warn", observed, expected, remedy, detail)


def skip(reason: str, expected: Any = None) -> Result:
    return Result("skip", reason, expected)


class Ctx:
    """What a check sees: the node, the profile, the level, and facts shared between checks."""

    def __init__(self, node: Node, profile: NodeProfile, level: str, node_name: Optional[str] = None) -> None:
        self.node = node
        self.profile = profile
        self.level = level
        # the orchestrator's name for this node (--node-name); None = the hostname, as actions.act uses
        self.node_name = node_name
        self._lock = threading.Lock()
        self._memo: Dict[str, Any] = {}
        self._memo_locks: Dict[str, threading.Lock] = {}

    def at(self, level: str) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """Compute a shared fact once (other checks asking for it wait for the first)."""
        with self._lock:
            lock = self._memo_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = fn()
            return self._memo[key]


CheckFn = Callable[[Ctx], Result]


class Check:
    def __init__(self, cid: str, layer: str, level: str, fn: CheckFn, required: bool = True,
                 applies: Optional[Callable[[NodeProfile], bool]] = None, title: str = "",
                 remedy: str = "") -> None:
        assert layer in LAYERS and level in LEVELS
        self.id = cid
        self.layer = layer
        self.level = level
        self.fn = fn
        self.required = required
        self.applies = applies
        self.title = title or cid
        self.remedy = remedy  # default remedy when the check errors


REGISTRY: List[Check] = []


def check(cid: str, layer: str, level: str = "fast", required: bool = True,
          applies: Optional[Callable[[NodeProfile], bool]] = None, title: str = "",
          remedy: str = "") -> Callable[[CheckFn], CheckFn]:
    def deco(fn: CheckFn) -> CheckFn:
        REGISTRY.append(Check(cid, layer, level, fn, required, applies, title or (fn.__doc__ or cid).strip(),
                              remedy))
        return fn
    return deco


def has_gpus(p: NodeProfile) -> bool:
    return int(p.fact("gpus", 0)) > 0


def has_nvswitch(p: NodeProfile) -> bool:
    return int(p.fact("gpus", 0)) > 1 and int(p.fact("nvlink_links_per_gpu", 0)) > 0


def has_efa(p: NodeProfile) -> bool:
    return int(p.fact("efa_interfaces", 0)) > 0


def has_instance_store(p: NodeProfile) -> bool:
    """The type has instance NVMe and the profile says where it is mounted (storage.instance_store applies)."""
    return bool(p.instance_store) and int(p.fact("nvme_disks", 0)) > 0


def all_checks() -> List[Check]:
    # one module per layer, named as the layer; importing them registers their checks
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

    seen: Dict[str, Check] = {}
    for c in REGISTRY:
        seen.setdefault(c.id, c)
    ordered = list(seen.values())
    return sorted(ordered, key=lambda c: (LAYERS.index(c.layer), LEVELS.index(c.level), ordered.index(c)))

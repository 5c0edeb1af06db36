"""The check registry: what a check is (Check, Result, Ctx), the layers, and the @check decorator.

Layer modules (checks/<layer>.py) and probes import this module; it imports neither, so nothing here is
circular."""

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
        if status not in STATUSES:
            raise ValueError(f"status: {status!r} is not one of {STATUSES}")
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
        if layer not in LAYERS or level not in LEVELS:
            raise ValueError(f"check {cid}: layer {layer!r} or level {level!r} unknown")
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


def version_verdict(ctx: Ctx, component: str, got: str, observed: Any, remedy: str,
                    problems: Optional[List[str]] = None) -> Result:
    """Judge an installed version: below the type's compatibility floor (or off a pin), or any other problem the
    check found, fails; behind the known-good bundle only warns (the stack still supports the type)."""
    floor = ctx.profile.min_versions.get(component)
    expected = f">= {floor}" if floor else "installed"
    found = list(problems or [])
    gap = ctx.profile.version_gap(component, got)
    if gap:
        found.append(f"{component} {gap}")
    if found:
        return bad(observed, expected, remedy, "; ".join(found))
    behind = ctx.profile.behind_known_good(component, got)
    if behind:
        return warn(observed, expected, f"supported, but a newer known-good bundle exists: update the AMI when "
                    f"convenient ({remedy})", f"{component} {behind}")
    return ok(observed, expected)

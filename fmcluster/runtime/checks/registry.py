"""The check registry: what a check is (Check, Result), the layers, and the @check decorator.

Layer modules (checks/<layer>.py) import this module; it imports none of them. The context a check sees (Ctx) and
the profile predicates live below the checks (fmcluster.runtime.context, fmcluster.runtime.profile), so the probes
never import the checks."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..context import Ctx as Ctx  # re-exported: the layer modules take their whole toolkit from here
from ..profile import LEVELS, NodeProfile
from ..profile import has_efa as has_efa
from ..profile import has_gpus as has_gpus
from ..profile import has_instance_store as has_instance_store
from ..profile import has_nvswitch as has_nvswitch

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


MountEntry = Dict[str, Any]  # one of the profile's mounts
MountProblem = Callable[[Ctx, MountEntry, Tuple[str, str, str]], str]


class MountKind:
    """What a store's node code (its node/checks.py) says of the profile mounts it owns: storage.mounts judges every
    mount alike (path, fstype, source, access) and asks the owner what else its mounts need (`problem`: "" when
    nothing is wrong) and what to do when one is wrong (`remedy`). `owns` defaults to the fstype; `untyped`: a
    profile mount without an fstype is this store's."""

    def __init__(self, fstype: str, remedy: str, owns: Optional[Callable[[MountEntry], bool]] = None,
                 problem: Optional[MountProblem] = None, untyped: bool = False) -> None:
        self.fstype = fstype
        self.remedy = remedy
        self.owns = owns or (lambda m: fstype_of(m) == fstype)
        self.problem = problem
        self.untyped = untyped


MOUNT_KINDS: List[MountKind] = []


def mount_kind(kind: MountKind) -> MountKind:
    MOUNT_KINDS.append(kind)
    return kind


def fstype_of(m: MountEntry) -> str:
    """A profile mount's fstype: its own, else the store's that takes untyped mounts, else "" (any)."""
    return str(m.get("fstype") or next((k.fstype for k in MOUNT_KINDS if k.untyped), ""))


def owner_of(m: MountEntry) -> Optional[MountKind]:
    return next((k for k in MOUNT_KINDS if k.owns(m)), None)


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

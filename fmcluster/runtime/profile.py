"""NodeProfile: what a node of one node group must look like.

Rendered to JSON at synth for every node group and shipped with the runtime; the validator reads it with
``--profile FILE``, or builds one from the instance catalog alone with ``--instance-type T``.

JSON fields (``schema`` 1; unknown keys are ignored on load, missing keys take the defaults below):

- ``schema`` (int): format version, 1.
- ``instance_type`` (str): EC2 type without the HyperPod ``ml.`` prefix, e.g. ``p5.48xlarge``.
- ``group`` (str): node group name, informational ("" when built from the catalog).
- ``facts`` (object): the catalog entry for the type (gpus, gpu, gpu_arch, gpu_memory_mib, efa_interfaces,
  nvlink_links_per_gpu, nvme_disks, hbm_tbps, bf16_dense_tflops, ...), copied from runtime/catalog.json at build time.
- ``mounts`` (list of objects): ``{"path": "/shared", "fstype": "...", "source"?: "...", "required": true,
  "read_only"?: bool, "efa"?: bool}``, each what a store's settings say (``node_mounts``); the store's node checks
  (``platforms/storage/<store>/node/checks.py``) read the rest, e.g. ``efa`` (optional bool, default false): the file
  system is reached over EFA, which the store's checks hold the node's client to.
- ``instance_store`` (str or null): where the instance NVMe must be mounted, default ``/opt/dlami/nvme`` when the type
  has local NVMe; null to skip.
- ``exporters`` (list of objects): ``{"name": "dcgm-exporter", "url": "http://127.0.0.1:9400/metrics",
  "expect": "DCGM_FI_DEV_GPU_TEMP", "required": true}``; ``expect`` (optional) must appear in the body.
- ``orchestrator`` (str or null): ``slurm`` (slurmd must be active), ``kubernetes`` (kubelet), or null.
- ``min_versions`` (object name -> version): compatibility floors, the oldest version that supports the instance
  type; a node below one FAILS. Keys ``driver``, ``cuda``, ``efa_installer``, ``libfabric``, ``aws_ofi_nccl``,
  ``nccl``, ``dcgm``, ``gdrcopy``, ``torch``. Default: the catalog's floors for the type (catalog.json
  ``min_versions``, sources in docs/validation.md); a key set to null removes that floor.
- ``known_good`` (object name -> version): the newest bundle known to work (KNOWN_GOOD_BUNDLE); a node behind it
  but above the floors gets a WARNING, never a failure.
- ``pinned_versions`` (object name -> version): exact versions required (same keys), default empty.
- ``optional`` (list of component names): components whose absence is a ``skip``, not a failure
  (default ``["torch", "gdrcopy", "dcgm"]``).
- ``policy`` (str): ``fail`` | ``drain`` | ``taint`` | ``replace`` | ``report`` — what to do when a required check
  fails (``replace``: SageMaker HyperPod's replacement for a hardware fault, drain otherwise; actions.py).
- ``level`` (str): default level ``fast`` | ``standard`` | ``deep``.
- ``errors_fail`` (bool): a required check ending in ``error`` (tool missing, hung, garbled) counts as failed
  (default true: a node must prove its stack); false = fail open.
- ``fabric_wait_s`` (float): how long to retry while the NVLink fabric is ``In Progress`` (default 90).
- ``thresholds`` (object): deep-level floors as fractions of catalog peaks: ``gemm_fraction`` (0.6 of
  bf16_dense_tflops), ``hbm_fraction`` (0.7 of hbm_tbps), ``allreduce_busbw_gbps`` (default 0.7 x half the
  per-GPU NVLink GB/s: 315 on H100/H200, 630 on B200).
- ``disabled_checks`` (list of check ids): checks to report as ``skip``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

from . import versions
from .contract import INSTANCE_NVME_ROOT, NODE_AGENTS, ec2_type

SCHEMA = 1
VERSION_COMPONENTS = ("driver", "cuda", "efa_installer", "libfabric", "aws_ofi_nccl", "nccl", "dcgm", "gdrcopy", "torch")
LEVELS = ("fast", "standard", "deep")
POLICIES = ("fail", "drain", "taint", "replace", "report")

# The newest known-good bundle: the Deep Learning Base OSS NVIDIA Driver GPU AMI of 2026-09-15 (DLAMI release notes,
# https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html). Being behind it is a warning.
KNOWN_GOOD_BUNDLE: Dict[str, str] = {
    "driver": "595.91.07",
    "cuda": "13.2",
    "efa_installer": "1.50.0",
    "libfabric": "2.6.0",
    "aws_ofi_nccl": "1.21.1",
    "dcgm": "4.7.0",
    "gdrcopy": "2.5.2",
}
DEFAULT_OPTIONAL = ["torch", "gdrcopy", "dcgm"]
DEFAULT_INSTANCE_STORE = INSTANCE_NVME_ROOT

_CATALOG_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog.json")


class ProfileError(ValueError):
    """A profile or instance type that cannot be used (usage error, exit 2)."""


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v not in (float("inf"), float("-inf"))


def _is_str_map(v: Any, nullable: bool = False) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and (isinstance(x, str) or (nullable and x is None))
                                       for k, x in v.items())


# field -> (test, what it must be)
_FIELD_TYPES = {
    "instance_type": (lambda v: isinstance(v, str), "a string"),
    "group": (lambda v: isinstance(v, str), "a string"),
    "facts": (lambda v: isinstance(v, dict), "an object"),
    "mounts": (lambda v: isinstance(v, list), "a list of objects"),
    "instance_store": (lambda v: v is None or isinstance(v, str), "a path or null"),
    "exporters": (lambda v: isinstance(v, list), "a list of objects"),
    "orchestrator": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "min_versions": (lambda v: _is_str_map(v, nullable=True), "an object of version strings (or null)"),
    "known_good": (lambda v: _is_str_map(v), "an object of version strings"),
    "pinned_versions": (lambda v: _is_str_map(v), "an object of version strings"),
    "optional": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of component names"),
    "policy": (lambda v: isinstance(v, str), "a string"),
    "level": (lambda v: isinstance(v, str), "a string"),
    "errors_fail": (lambda v: isinstance(v, bool), "true or false"),
    "fabric_wait_s": (lambda v: _is_number(v) and v >= 0, "a number of seconds, 0 or more"),
    "thresholds": (lambda v: isinstance(v, dict), "an object of numbers"),
    "disabled_checks": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of check ids"),
    "schema": (lambda v: v == SCHEMA and not isinstance(v, bool), f"{SCHEMA}"),
}


def _expect_types(profile: Any) -> None:
    """Raise a ProfileError naming the first field (or fact, or threshold) of the wrong type."""
    for name, (ok, what) in _FIELD_TYPES.items():
        value = getattr(profile, name)
        if not ok(value):
            raise ProfileError(f"{name}: must be {what}, not {_short(value)}")
    for name, value in profile.thresholds.items():
        if not _is_number(value):
            raise ProfileError(f"thresholds.{name}: must be a number, not {_short(value)}")
    reference = load_catalog().get(profile.instance_type, {})
    for name, value in profile.facts.items():
        want = reference.get(name)
        if _is_number(want) and not _is_number(value):
            raise ProfileError(f"facts.{name}: must be a number, not {_short(value)}")
        if isinstance(want, (str, list, dict)) and not isinstance(value, type(want)):
            raise ProfileError(f"facts.{name}: must be {type(want).__name__}, not {_short(value)}")


def load_catalog(path: Optional[str] = None) -> Dict[str, Dict[str, Any]]:
    with open(path or _CATALOG_PATH, encoding="utf-8") as fh:
        data = json.load(fh)
    types = data.get("types")
    if not isinstance(types, dict):
        raise ProfileError("catalog.json has no 'types' table")
    return types


def catalog_facts(instance_type: str) -> Dict[str, Any]:
    types = load_catalog()
    t = ec2_type(instance_type)
    if t not in types:
        gpu_types = sorted(k for k, v in types.items() if v.get("gpus"))
        raise ProfileError(f"unknown instance type {instance_type!r}; known GPU types: {', '.join(gpu_types)}")
    facts = {k: v for k, v in types[t].items() if k not in ("sources", "notes")}
    return facts


@dataclasses.dataclass
class NodeProfile:
    instance_type: str
    facts: Dict[str, Any]
    group: str = ""
    mounts: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    instance_store: Optional[str] = DEFAULT_INSTANCE_STORE
    exporters: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    orchestrator: Optional[str] = None
    min_versions: Dict[str, Optional[str]] = dataclasses.field(default_factory=dict)
    known_good: Dict[str, str] = dataclasses.field(default_factory=lambda: dict(KNOWN_GOOD_BUNDLE))
    pinned_versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    optional: List[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_OPTIONAL))
    policy: str = "report"
    level: str = "standard"
    errors_fail: bool = True
    fabric_wait_s: float = 90.0
    thresholds: Dict[str, float] = dataclasses.field(default_factory=dict)
    disabled_checks: List[str] = dataclasses.field(default_factory=list)
    schema: int = SCHEMA

    # ---- construction -------------------------------------------------------------------------------
    @classmethod
    def from_catalog(cls, instance_type: str, **overrides: Any) -> NodeProfile:
        """Profile for ``instance_type`` from the catalog; keyword overrides set any field.

        ``min_versions`` overrides are merged over the type's catalog floors (a value of None removes a floor).
        """
        facts = catalog_facts(instance_type)
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(overrides) - fields
        if unknown:
            raise ProfileError(f"unknown NodeProfile field(s): {', '.join(sorted(unknown))}")
        mins: Dict[str, Optional[str]] = dict(facts.get("min_versions") or {})
        mins.update(overrides.pop("min_versions", None) or {})
        if not facts.get("nvme_disks") and "instance_store" not in overrides:
            overrides["instance_store"] = None
        prof = cls(instance_type=ec2_type(instance_type), facts=facts, min_versions=mins, **overrides)
        prof.validate()
        return prof

    def validate(self) -> None:
        """Every field of the type the validator relies on: a bad profile is one ProfileError (exit 2), never a
        crash half-way through a node's checks."""
        _expect_types(self)
        if self.policy not in POLICIES:
            raise ProfileError(f"policy: {self.policy!r} is not one of {', '.join(POLICIES)}")
        if self.level not in LEVELS:
            raise ProfileError(f"level: {self.level!r} is not one of {', '.join(LEVELS)}")
        if self.orchestrator is not None and self.orchestrator not in NODE_AGENTS:
            raise ProfileError(f"orchestrator: {self.orchestrator!r} is not {', '.join(NODE_AGENTS)} or null")
        for m in self.mounts:
            if not isinstance(m, dict) or not str(m.get("path", "")).startswith("/"):
                raise ProfileError(f"mounts: {_short(m)} needs an absolute 'path'")
            if not isinstance(m.get("efa", False), bool):
                raise ProfileError(f"mounts: {_short(m)}: 'efa' must be true or false")
        for e in self.exporters:
            if not isinstance(e, dict) or not str(e.get("url", "")).startswith(("http://", "https://")):
                raise ProfileError(f"exporters: {_short(e)} needs an http(s) 'url'")

    def behind_known_good(self, component: str, got: str) -> Optional[str]:
        """Why `got` is older than the known-good bundle (a warning, not a failure), or None."""
        good = self.known_good.get(component)
        if good and not versions.at_least(got, good):
            return f"{got} is behind the known-good bundle's {good}"
        return None

    def version_gap(self, component: str, got: str) -> Optional[str]:
        """Why version `got` of `component` breaks this profile's minimum or pin, or None when it meets both."""
        want = self.min_versions.get(component)
        if want and not versions.at_least(got, want):
            return f"{got} < minimum {want}"
        pin = self.pinned_versions.get(component)
        if pin and not versions.same(got, pin):
            return f"{got} != pinned {pin}"
        return None

    # ---- JSON ----------------------------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> NodeProfile:
        if not isinstance(data, dict):
            raise ProfileError("profile must be a JSON object")
        if "instance_type" not in data:
            raise ProfileError("profile: 'instance_type' is missing")
        if not isinstance(data["instance_type"], str):
            raise ProfileError(f"instance_type: must be a string, not {_short(data['instance_type'])}")
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in fields}
        if "facts" not in kwargs or not kwargs["facts"]:
            kwargs["facts"] = catalog_facts(data["instance_type"])
        kwargs["instance_type"] = ec2_type(str(kwargs["instance_type"]))
        try:
            prof = cls(**kwargs)
        except TypeError as exc:
            raise ProfileError(f"profile: {exc}") from exc
        prof.validate()
        return prof

    @classmethod
    def from_json(cls, text: str) -> NodeProfile:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ProfileError(f"profile is not JSON: {exc}") from exc
        except RecursionError:
            raise ProfileError("profile is not a NodeProfile: nested too deeply") from None
        return cls.from_dict(data)

    # ---- helpers used by checks ---------------------------------------------------------------------
    def fact(self, name: str, default: Any = 0) -> Any:
        v = self.facts.get(name)
        return default if v is None else v

    def is_optional(self, component: str) -> bool:
        return component in self.optional

    def threshold(self, name: str) -> float:
        if name in self.thresholds:
            return float(self.thresholds[name])
        if name == "gemm_fraction":
            return 0.6
        if name == "hbm_fraction":
            return 0.7
        if name == "allreduce_busbw_gbps":
            return round(0.7 * float(self.fact("nvlink_gbs_per_gpu", 0)) / 2, 1)
        raise KeyError(name)


# Predicates on the profile that decide whether a check or probe applies.
def has_gpus(p: NodeProfile) -> bool:
    return int(p.fact("gpus", 0)) > 0


def has_nvswitch(p: NodeProfile) -> bool:
    return int(p.fact("gpus", 0)) > 1 and int(p.fact("nvlink_links_per_gpu", 0)) > 0


def has_efa(p: NodeProfile) -> bool:
    return int(p.fact("efa_interfaces", 0)) > 0


def has_instance_store(p: NodeProfile) -> bool:
    """The type has instance NVMe and the profile says where it is mounted (storage.instance_store applies)."""
    return bool(p.instance_store) and int(p.fact("nvme_disks", 0)) > 0

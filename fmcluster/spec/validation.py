"""The spec's `validation` section: how nodes prove their software stack at boot, and what a failure does
(not to be confused with validating the spec itself, which every model here does). docs/validation.md lists every
check, the version floors and their sources."""

from __future__ import annotations

import functools
import re
from typing import Dict, FrozenSet, List, Literal, Optional

from pydantic import Field, field_validator

from fmcluster.runtime.profile import VERSION_COMPONENTS
from fmcluster.spec.base import SpecModel

VERSION_PATTERN = r"^\d+(\.\d+){0,3}([.+~-]?[A-Za-z0-9.]+)?$"


@functools.lru_cache(maxsize=1)
def check_ids() -> FrozenSet[str]:
    """Every boot check's id (the node-side registry, standard library only)."""
    from fmcluster.runtime.checks import all_checks

    return frozenset(c.id for c in all_checks())


def _components(v: Dict[str, Optional[str]]) -> Dict[str, Optional[str]]:
    unknown = sorted(set(v) - set(VERSION_COMPONENTS))
    if unknown:
        raise ValueError(f"unknown components {', '.join(unknown)}; allowed: {', '.join(VERSION_COMPONENTS)}")
    bad = [f"{k}={x}" for k, x in v.items() if x is not None and not re.match(VERSION_PATTERN, x)]
    if bad:
        raise ValueError(f"not versions: {', '.join(bad)} (e.g. 595.91.07, 13.2, 1.21.1)")
    return v


class Validation(SpecModel):
    """How nodes check their software stack at boot, and what a failure does."""

    level: Literal["fast", "standard", "deep"] = Field(
        "standard", description="fast: sysfs/procfs; standard: + one call of each tool; deep: + DCGM, GEMM, NCCL."
    )
    policy: Optional[Literal["fail", "drain", "taint", "replace", "report"]] = Field(
        None, description="fail stops provisioning; drain (Slurm) / taint (Kubernetes) keep the node out of work; "
        "replace (SageMaker HyperPod) asks HyperPod for a new instance when a hardware check failed, and drains or "
        "taints otherwise; report only reports. Default: the orchestrator's (drain on Slurm, taint on Kubernetes, fail on "
        "ParallelCluster, report without an orchestrator)."
    )
    skip_checks: List[str] = Field(
        default_factory=list, description="Check ids to skip on every node (reported as skip), e.g. hw.mig."
    )
    min_versions: Dict[str, Optional[str]] = Field(
        default_factory=dict,
        description="Raise (or with null remove) the compatibility floors of components, e.g. {nccl: '2.27'}.",
    )
    pinned_versions: Dict[str, str] = Field(
        default_factory=dict, description="Exact versions every node must run, e.g. {aws_ofi_nccl: 1.21.1}."
    )

    @field_validator("skip_checks")
    @classmethod
    def _known_checks(cls, v: List[str]) -> List[str]:
        unknown = sorted(set(v) - check_ids())
        if unknown:
            raise ValueError(f"unknown checks {', '.join(unknown)}; the ids are listed in docs/validation.md")
        return v

    @field_validator("min_versions")
    @classmethod
    def _min_versions(cls, v: Dict[str, Optional[str]]) -> Dict[str, Optional[str]]:
        return _components(v)

    @field_validator("pinned_versions")
    @classmethod
    def _pins(cls, v: Dict[str, str]) -> Dict[str, str]:
        _components(dict(v))
        return v

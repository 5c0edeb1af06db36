"""The spec's `validation` section: how nodes prove their software stack at boot, and what a failure does
(not to be confused with validating the spec itself, which every model here does)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fmcluster.spec.base import SpecModel


class Validation(SpecModel):
    """How nodes check their software stack at boot, and what a failure does."""

    level: Literal["fast", "standard", "deep"] = Field(
        "standard", description="fast: sysfs/procfs; standard: + one call of each tool; deep: + DCGM, GEMM, NCCL."
    )
    policy: Literal["fail", "drain", "taint", "report"] = Field(
        "drain", description="fail stops provisioning; drain (Slurm) / taint (Kubernetes) keep the node out of work."
    )

"""EKS standard and extended support: which one a cluster's Kubernetes version is in on a day, and the control plane
as the service the plan bills by the hour at that support's rate (the Kubernetes kinds' `billed_services`)."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Optional

from fmcluster.platforms.kubernetes.versions import END_OF_STANDARD_SUPPORT
from fmcluster.spec.orchestrator import BilledService

STANDARD, EXTENDED = "eks-cluster", "eks-cluster-extended-support"  # their prices' keys in the planner's data


def today() -> date:
    """The UTC day: EKS bills extended support from the start of the end-of-standard-support day, UTC."""
    return datetime.now(timezone.utc).date()


def end_of_standard_support(version: str) -> date:
    return date.fromisoformat(END_OF_STANDARD_SUPPORT[version])


def control_plane_service(version: str, *, on: Optional[date] = None) -> BilledService:
    """The control plane of a cluster on `version`, billed at the rate of the support it is in `on` (default: today)."""
    end = end_of_standard_support(version)
    if (on or today()) >= end:
        return BilledService(EXTENDED, f"1 cluster, Kubernetes {version}: extended support since {end.isoformat()} "
                                       f"(a version in standard support costs less)")
    return BilledService(STANDARD, f"1 cluster, Kubernetes {version}: standard support; extended support, at a higher "
                                   f"rate, from {end.isoformat()}")

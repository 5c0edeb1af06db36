"""EKS standard and extended support: which one a cluster's Kubernetes version is in on a day, and the control plane
as the service the plan bills by the hour at that support's rate (the Kubernetes kinds' `billed_services`)."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any, List, Optional, Sequence

from fmcluster.platforms.kubernetes.versions import END_OF_STANDARD_SUPPORT
from fmcluster.spec.orchestrator import BilledService, SpecWarning

STANDARD, EXTENDED = "eks-cluster", "eks-cluster-extended-support"  # their prices' keys in the planner's data
AMP_COLLECTOR = "amp-collector"
PRICE_KEYS = frozenset({STANDARD, EXTENDED, AMP_COLLECTOR})  # what `billed_services` may name: the kinds' price_keys


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


def billed_services(spec: Any, version: str) -> List[BilledService]:
    """What a Kubernetes kind runs that bills by the hour: the control plane, and the AMP managed collector (the
    scraper) when the spec deploys observability."""
    found = [control_plane_service(version)]
    if spec.observability.enabled:
        found.append(BilledService(AMP_COLLECTOR, "1 managed collector (the cluster's scraper)"))
    return found


def in_standard_support(version: str, *, on: Optional[date] = None) -> bool:
    return (on or today()) < end_of_standard_support(version)


def newest_in_standard_support(versions: Sequence[str], *, on: Optional[date] = None) -> Optional[str]:
    """The newest of `versions` (oldest first) still in standard support `on` (default today), or None."""
    return next((v for v in reversed(versions) if in_standard_support(v, on=on)), None)


def version_for_a_new_cluster(versions: Sequence[str], *, on: Optional[date] = None) -> str:
    """What `fmcluster init` writes: the newest of the kind's versions in standard support, else its newest."""
    return newest_in_standard_support(versions, on=on) or versions[-1]


def version_warnings(control_plane: Any, *, path: str, versions: Sequence[str], kind: str,
                     on: Optional[date] = None) -> List[SpecWarning]:
    """A spec that leaves the version to fmcluster's default (which moves with EKS's calendar: the next deploy after
    it moves would upgrade the control plane), and a version in extended support today (`control_plane`: the kind's
    EksControlPlaneSettings; `versions`: the versions the kind supports, oldest first)."""
    version = control_plane.kubernetes_version
    found: List[SpecWarning] = []
    if "kubernetes_version" not in control_plane.model_fields_set:
        found.append(SpecWarning(path, f"not set: fmcluster's default, {version}, applies. A later fmcluster may "
                                       "default to another version, and the next deploy would then upgrade the "
                                       f"control plane: write kubernetes_version: \"{version}\" into the spec "
                                       "(fmcluster init does)"))
    if not in_standard_support(version, on=on):
        newest = newest_in_standard_support(versions, on=on)
        instead = (f"{newest} is in standard support until {end_of_standard_support(newest).isoformat()}" if newest
                   else f"none of the versions {kind} supports ({', '.join(versions)}) is in standard support")
        found.append(SpecWarning(path, f"Kubernetes {version} left EKS standard support on "
                                       f"{end_of_standard_support(version).isoformat()}: the control plane bills "
                                       f"extended support; {instead}", costs_more=(EXTENDED, STANDARD)))
    return found

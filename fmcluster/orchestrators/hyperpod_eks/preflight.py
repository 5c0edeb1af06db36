"""Preflight checks of SageMaker HyperPod on EKS (boto3, read only): HyperPod's instance quotas per ml. type and in
total (the hyperpod kind's checks: node groups and the system group, no controller), the EKS cluster quota, the
Kubernetes version in the Region, the add-ons for that version (task governance and, when asked for, the training
operator), the VPC CNI version HyperPod requires, and the control plane's second AZ. Training plans (type, AZ, size,
state) are checked for every kind by fmcluster.aws.capacity."""

from __future__ import annotations

import re
from functools import partial
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.aws.context import Context, PreflightCheck
from fmcluster.aws.results import FAIL, PASS, WARN, Outcome
from fmcluster.orchestrators.hyperpod_eks.settings import HyperPodEksOrchestrator
from fmcluster.orchestrators.hyperpod_eks.versions import (
    ADDONS,
    TRAINING_OPERATOR,
    TRAINING_OPERATOR_KUBERNETES_VERSIONS,
    VPC_CNI_MIN_VERSION,
)
from fmcluster.platforms.hyperpod import preflight as hyperpod_preflight
from fmcluster.platforms.kubernetes import preflight as eks_preflight
from fmcluster.platforms.kubernetes.settings import control_plane_of, control_plane_zone
from fmcluster.platforms.kubernetes.versions import AddonPin


def addons(spec: Any) -> Dict[str, AddonPin]:
    """The add-ons this spec installs (the training operator only when asked for)."""
    wanted = HyperPodEksOrchestrator.of(spec).hyperpod.training_operator
    return {name: pin for name, pin in ADDONS.items() if name != TRAINING_OPERATOR or wanted}


def checks(spec: Any) -> List[PreflightCheck]:
    version = control_plane_of(spec).kubernetes_version
    return hyperpod_preflight.checks(spec) + [
        PreflightCheck("quota:eks-clusters", "EKS clusters per Region", "service-quotas", eks_preflight.check_cluster_quota),
        PreflightCheck(f"eks:version:{version}", f"Kubernetes {version} on EKS", "eks", eks_preflight.check_version),
        PreflightCheck("eks:addons", f"add-on versions for Kubernetes {version}", "eks",
                       partial(eks_preflight.check_addons, addons=addons(spec))),
        PreflightCheck("eks:vpc-cni", f"VPC CNI >= {VPC_CNI_MIN_VERSION} (HyperPod)", "eks", check_vpc_cni),
        *([PreflightCheck("eks:training-operator", f"HyperPod training operator for Kubernetes {version}", "eks",
                          check_training_operator)] if HyperPodEksOrchestrator.of(spec).hyperpod.training_operator else []),
        PreflightCheck("eks:control-plane-az", f"second AZ {control_plane_zone(spec)}", "ec2",
                       eks_preflight.check_second_az),
    ]


def _version(text: str) -> Optional[Tuple[int, ...]]:
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else None


def check_vpc_cni(ctx: Context) -> Outcome:
    """The VPC CNI add-on version the cluster gets (the pin, else EKS's default for its Kubernetes version) is one
    HyperPod supports (HyperPod EKS prerequisites: 1.18.3 or later)."""
    version = control_plane_of(ctx.spec).kubernetes_version
    offered = eks_preflight.addon_versions(ctx, "vpc-cni", version)
    pinned = ADDONS["vpc-cni"].version_for(version)
    chosen = pinned or next((v for v, default in offered.items() if default), None)
    want = f">= {VPC_CNI_MIN_VERSION}"
    if chosen is None:
        return Outcome(WARN, f"EKS names no default vpc-cni version for Kubernetes {version}", want,
                       "pin a vpc-cni version in fmcluster/platforms/kubernetes/versions.py")
    parsed, floor = _version(chosen), _version(VPC_CNI_MIN_VERSION)
    if parsed is None or floor is None:
        return Outcome(WARN, f"vpc-cni {chosen}: not a version fmcluster can compare", want)
    if parsed < floor:
        return Outcome(FAIL, f"vpc-cni {chosen}{' (default)' if not pinned else ''}", want,
                       "pin a newer vpc-cni version (HyperPod refuses older ones)")
    return Outcome(PASS, f"vpc-cni {chosen}{' (default)' if not pinned else ''}", want)


def check_training_operator(ctx: Context) -> Outcome:
    """EKS offers the training operator add-on for the cluster's Kubernetes version. Its page documents fewer versions
    than HyperPod supports; what EKS offers decides, the page says what to choose when it offers none."""
    version = control_plane_of(ctx.spec).kubernetes_version
    documented = f"{TRAINING_OPERATOR_KUBERNETES_VERSIONS[0]}-{TRAINING_OPERATOR_KUBERNETES_VERSIONS[-1]}"
    want = f"the add-on offered for Kubernetes {version} (documented: {documented})"
    offered = eks_preflight.addon_versions(ctx, TRAINING_OPERATOR, version)
    if not offered:
        return Outcome(FAIL, f"{TRAINING_OPERATOR} not offered for Kubernetes {version}", want,
                       f"set orchestrator.eks.kubernetes_version to {TRAINING_OPERATOR_KUBERNETES_VERSIONS[-1]}, or "
                       "orchestrator.hyperpod.training_operator to false")
    default = next((v for v, d in offered.items() if d), sorted(offered)[-1])
    note = "" if version in TRAINING_OPERATOR_KUBERNETES_VERSIONS else f"; newer than the page lists ({documented})"
    return Outcome(PASS, f"{TRAINING_OPERATOR} {default}{note}", want)

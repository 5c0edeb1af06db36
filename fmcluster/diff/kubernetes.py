"""What a Kubernetes version bump or a scheduler switch does to an EKS cluster (plain or under HyperPod)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from fmcluster.diff.changes import ADDED, MODIFIED, REMOVED, ResourceChange
from fmcluster.diff.findings import CONTROL_PLANE, Finding

EKS_UPDATE_CLUSTER = "https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html"
EKS_UPDATE_NODES = "https://docs.aws.amazon.com/eks/latest/userguide/update-managed-node-group.html"
VERSION_SKEW = "https://kubernetes.io/releases/version-skew-policy/"
EKS_NETWORK = "https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html"
KUEUE_WEBHOOKS = "https://github.com/kubernetes-sigs/kueue/blob/main/config/components/webhook/manifests.yaml"
VOLCANO_JOBS = "https://volcano.sh/en/docs/vcjob/"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"

# Schedulers installed as charts, and what their removal leaves behind.
SCHEDULERS = {
    "kueue": ("Kueue is uninstalled: jobs it admitted keep running (their pods are already bound to nodes), jobs it "
              "holds suspended stay suspended and are never admitted (resubmit them for the new scheduler), and its "
              "webhooks fail closed (failurePolicy Fail) until they are removed with it, so job and pod creation in "
              "the cluster can fail during the switch; what Kueue does with its Workloads on removal is not "
              "documented (unverified). Switch between jobs", KUEUE_WEBHOOKS),
    "volcano": ("Volcano is uninstalled: pods it already bound keep running, pending pods with schedulerName volcano "
                "are never scheduled (resubmit them for the new scheduler), and Volcano Jobs lose their controller. "
                "Switch between jobs", VOLCANO_JOBS),
}


def _minor(version: object) -> Optional[Tuple[int, int]]:
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def cluster_version(c: ResourceChange) -> List[Finding]:
    """An EKS control plane whose Version changes: one minor at a time, never down; node groups stay behind."""
    if c.type != "AWS::EKS::Cluster" or c.action != MODIFIED:
        return []
    old, new = ((r or {}).get("Properties", {}).get("Version") for r in (c.old, c.new))
    if old == new:
        return []
    a, b = _minor(old), _minor(new)
    nodes = ("Managed node groups are not upgraded with it (fmcluster's templates name no node group version): "
             "upgrade each when it is idle with `aws eks update-nodegroup-version --cluster-name <cluster> "
             "--nodegroup-name <group>` (a rolling replacement of its nodes, drained within PodDisruptionBudgets); "
             "kubelet may stay up to three minor versions behind the control plane")
    if a is None or b is None or b[0] != a[0] or b[1] != a[1] + 1:
        if a is not None and b is not None and b > a:
            why, way = "more than one minor version", f"upgrade one minor version per deploy ({old} -> {a[0]}.{a[1] + 1} first)"
        else:
            why, way = "not an upgrade to the next minor version", f"keep {old}: a control plane is never downgraded"
        return [Finding(CONTROL_PLANE, c.where, f"Kubernetes {old} -> {new}: the update fails: EKS upgrades a control "
                        f"plane one minor version at a time and never down, and this is {why}. Way through: {way}",
                        sources=[EKS_UPDATE_CLUSTER], fails=True)]
    return [Finding(CONTROL_PLANE, c.where, f"Kubernetes {old} -> {new}: the control plane is upgraded in place (running "
                    f"pods keep running; the API server is briefly unavailable while it rolls). {nodes}",
                    sources=[EKS_UPDATE_CLUSTER, EKS_UPDATE_NODES, VERSION_SKEW])]


def subnets(c: ResourceChange, moved_zones: bool) -> List[Finding]:
    """An EKS control plane asked to move to subnets in other Availability Zones, which EKS refuses."""
    if c.type != "AWS::EKS::Cluster" or c.action != MODIFIED or not moved_zones:
        return []
    if not any(p[:2] == ("ResourcesVpcConfig", "SubnetIds") for p in c.paths):
        return []
    return [Finding(CONTROL_PLANE, c.where, "the update fails: the control plane's subnets move to another Availability "
                    "Zone, and EKS accepts new subnets only in the Availability Zones chosen when the cluster was "
                    "created. Way through: keep availability_zone and second_availability_zone, or destroy the "
                    "cluster stack first and create the cluster again", sources=[EKS_NETWORK], fails=True)]


def scheduler(c: ResourceChange) -> List[Finding]:
    """A scheduler's chart removed (a switch of orchestrator.eks.scheduler)."""
    if c.type != HELM_CHART or c.action not in (REMOVED, ADDED):
        return []
    chart = str(((c.old if c.action == REMOVED else c.new) or {}).get("Properties", {}).get("Chart", ""))
    if chart not in SCHEDULERS:
        return []
    if c.action == ADDED:
        return [Finding(CONTROL_PLANE, c.where, f"{chart} is installed: new jobs are scheduled through it; jobs "
                        "submitted for another scheduler are not")]
    text, source = SCHEDULERS[chart]
    return [Finding(CONTROL_PLANE, c.where, text, sources=[source])]

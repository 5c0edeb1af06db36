"""Preflight checks of the eks kind (boto3, read only): the control plane's (fmcluster.platforms.kubernetes.preflight),
the managed node group quotas, and the EKS-optimized AMI's public SSM parameter of each node group."""

from __future__ import annotations

from functools import partial
from typing import Any, List

from fmcluster import catalog
from fmcluster.aws.context import Context, PreflightCheck
from fmcluster.aws.quotas import find_quota
from fmcluster.aws.results import FAIL, PASS, Outcome
from fmcluster.orchestrators.eks.settings import EksOrchestrator
from fmcluster.platforms.kubernetes.preflight import (
    ami_parameter,
    check_addons,
    check_admins,
    check_ami_parameter,
    check_cluster_quota,
    check_second_az,
    check_version,
)
from fmcluster.platforms.kubernetes.settings import control_plane_of, control_plane_zone


def checks(spec: Any) -> List[PreflightCheck]:
    version = control_plane_of(spec).kubernetes_version
    found = [
        PreflightCheck("quota:eks-clusters", "EKS clusters per Region", "service-quotas", check_cluster_quota),
        PreflightCheck("quota:eks-node-groups", "EKS managed node groups and their nodes", "service-quotas",
                       check_node_group_quotas),
        PreflightCheck(f"eks:version:{version}", f"Kubernetes {version} on EKS", "eks", check_version),
        PreflightCheck("eks:addons", f"add-on versions for Kubernetes {version}", "eks", check_addons),
        PreflightCheck("eks:control-plane-az", f"second AZ {control_plane_zone(spec)}", "ec2", check_second_az),
        PreflightCheck("eks:admins", "cluster admins exist in this account", "iam", check_admins),
    ]
    parameters = {ami_parameter(version, g.instance.architecture, g.instance.is_gpu) for g in spec.node_groups}
    system = catalog.get(EksOrchestrator.of(spec).eks.system_nodes.instance_type)
    parameters.add(ami_parameter(version, system.architecture, False))  # the system node group
    for name in sorted(parameters):
        arch, variant = name.split("/")[7:9]
        found.append(PreflightCheck(f"ami:{version}-{arch}-{variant}", f"EKS AMI {name}", "ssm",
                                    partial(check_ami_parameter, name=name)))
    return found


def check_node_group_quotas(ctx: Context) -> Outcome:
    """'Managed node groups per cluster' (the spec's groups and the system group) and 'Nodes per managed node group'
    (the largest group); both by name, as Service Quotas lists them for EKS."""
    groups = len(ctx.spec.node_groups) + 1
    largest = max(max(g.max_size for g in ctx.spec.node_groups), EksOrchestrator.of(ctx.spec).eks.system_nodes.count)
    per_cluster = find_quota(ctx, "eks", lambda n: n.strip().lower() == "managed node groups per cluster")
    per_group = find_quota(ctx, "eks", lambda n: n.strip().lower() == "nodes per managed node group")
    parts, worst = [], PASS
    for q, need, what in ((per_cluster, groups, "node groups"), (per_group, largest, "nodes in one group")):
        if q is None:
            parts.append(f"no quota '{what}' found by name")
            continue
        parts.append(f"'{q['QuotaName']}' {float(q['Value']):g}, spec needs {need}")
        if need > float(q["Value"]):
            worst = FAIL
    return Outcome(worst, "; ".join(parts), f"{groups} node groups, {largest} nodes in the largest",
                   "" if worst == PASS else "request an increase in Service Quotas (Amazon EKS)")

"""What a change of a node group's sizes does to the instances running in it.

CloudFormation does not know how many instances an autoscaler, Slurm or a person scaled a group to. When a group's
sizes change at all, it sends the template's whole scaling configuration, so the desired size in the template is
applied over whatever runs. AWS documents only that removing DesiredSize from a template leaves the size alone; that a
change of MinSize or MaxSize alone re-applies it is what users report (eksctl-io/eksctl#3532): unverified, and the safe
side (docs/changes.md, "Sizes"). What may be running is anything up to the group's maximum; what the deploy sets it
to is the template's desired size.
"""

from __future__ import annotations

from typing import List

from fmcluster.diff.findings import NODES, SAFE, Finding
from fmcluster.diff.groups import NodeUnit, size_of

EKS_SCALING = "https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html"
EKS_CAPACITY_BLOCKS = "https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html"
CFN_RESENDS = "https://github.com/eksctl-io/eksctl/issues/3532"
PCS_SCALING = "https://docs.aws.amazon.com/pcs/latest/userguide/working-with_cng_update.html"

EKS_SCALE_IN = "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html"
EKS_SCALE_IN_JOBS = ("die on the nodes removed: the Auto Scaling group picks which instances go (its termination "
                     "policy, not the scheduler); EKS tries to evict their pods, but a lower desired size does not "
                     "respect PodDisruptionBudgets and a node is terminated after 15 minutes whether its pods left or "
                     "not. CloudFormation sets the size; the Cluster Autoscaler may add nodes back afterwards for pods "
                     "left pending")


def _gpus(u: NodeUnit, n: int) -> int:
    return n * (u.gpus // u.count) if u.count else 0


def eks(a: NodeUnit, b: NodeUnit) -> List[Finding]:
    """An EKS managed node group whose ScalingConfig changes: the whole ScalingConfig is sent, DesiredSize included."""
    if a.scaling == b.scaling:
        return []
    sent = size_of((b.scaling or {}).get("DesiredSize"))
    most = a.max_size  # what may be running: a static group's count, a block's count, an elastic group's maximum
    sizes = f"ScalingConfig {_sizes(a)} -> {_sizes(b)}"
    count = f"count {a.count} -> {sent}" if a.count != sent else f"count {sent}"
    if sent < most:
        lost = most - sent
        if a.capacity_block:
            text = (f"{a.describe(lost)} terminated: the Capacity Block group runs {most} node(s) once its block is "
                    f"active, and CloudFormation sends the template's DesiredSize {sent} with the new sizes ({sizes})")
            return [Finding(NODES, a.key, text, _gpus(a, lost), EKS_SCALE_IN_JOBS,
                            [EKS_SCALING, CFN_RESENDS, EKS_CAPACITY_BLOCKS])]
        if a.min_size == a.max_size:
            text = f"{a.describe(lost)} terminated: {count} ({sizes})"
        else:
            text = (f"up to {a.describe(lost)} terminated: {count} ({sizes}); CloudFormation sends "
                    f"DesiredSize {sent} with the new sizes, so the group is set to {sent} node(s) whatever the "
                    f"Cluster Autoscaler scaled it to ({a.min_size} to {most}): every node above {sent} goes")
        return [Finding(NODES, a.key, text, _gpus(a, lost), EKS_SCALE_IN_JOBS, [EKS_SCALING, CFN_RESENDS, EKS_SCALE_IN])]
    grown = sent - a.count
    launched = f": {b.describe(grown)} launched" if grown > 0 else ""
    elastic = "" if a.min_size == a.max_size else (
        f"; CloudFormation sends DesiredSize {sent} with the new sizes: a group the Cluster Autoscaler had scaled "
        f"below {sent} is scaled back up to it")
    return [Finding(SAFE, a.key, f"{count} ({sizes}){launched}{elastic}", sources=[EKS_SCALING])]


def pcs(a: NodeUnit, b: NodeUnit) -> List[Finding]:
    """A PCS compute node group: static instances are the minimum; Slurm starts dynamic ones up to the maximum."""
    if a.scaling == b.scaling:
        return []
    out: List[Finding] = []
    static_lost = max(0, a.min_size - b.min_size)
    if static_lost:
        out.append(Finding(NODES, a.key, f"{a.describe(static_lost)} terminated: static instances {a.min_size} -> "
                           f"{b.min_size}; AWS PCS terminates the static instances above the new minimum",
                           _gpus(a, static_lost), "die: the instances are terminated", [PCS_SCALING]))
    elif b.min_size > a.min_size:
        out.append(Finding(SAFE, a.key, f"static instances {a.min_size} -> {b.min_size}: "
                           f"{b.describe(b.min_size - a.min_size)} launched"))
    dynamic_lost = max(0, a.max_size - b.max_size) - static_lost
    if dynamic_lost > 0 and a.max_size > a.min_size:
        out.append(Finding(NODES, a.key, f"up to {a.describe(dynamic_lost)} terminated: maximum {a.max_size} -> "
                           f"{b.max_size}; dynamic instances Slurm started above the new maximum are not kept "
                           "(what AWS PCS does with them and their jobs is not documented: unverified, plan for it)",
                           _gpus(a, dynamic_lost), "die on the instances removed (unverified)", [PCS_SCALING]))
    if not out:
        out.append(Finding(SAFE, a.key, f"maximum {a.max_size} -> {b.max_size}: Slurm may start up to "
                           f"{max(0, b.max_size - a.max_size)} more dynamic instance(s) for jobs"))
    return out


def _sizes(u: NodeUnit) -> str:
    s = u.scaling or {}
    return f"min {s.get('MinSize', '-')}/desired {s.get('DesiredSize', '-')}/max {s.get('MaxSize', '-')}"


SCALERS = {"eks": eks, "pcs": pcs}

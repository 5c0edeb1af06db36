"""Node groups as each orchestrator declares them, and what a change does to their running instances and jobs.

Each service documents its own update behaviour; the words and sources below are what the findings quote
(docs/changes.md has the table).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from fmcluster.diff import refusals
from fmcluster.diff.changes import REPLACED, ResourceChange
from fmcluster.diff.findings import CAPACITY, NODES, SAFE, Finding
from fmcluster.diff.groups import NodeUnit
from fmcluster.diff.scaling import SCALERS

EKS_UPDATE = "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html"
EKS_CAPACITY_BLOCKS = "https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html"
EKS_UPDATE_CONFIG = "https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html"
PCS_NODE_GROUP_UPDATE = "https://docs.aws.amazon.com/pcs/latest/userguide/working-with_cng_update.html"
HYPERPOD_LIFECYCLE_UPDATE = ("https://docs.aws.amazon.com/sagemaker/latest/dg/"
                             "sagemaker-hyperpod-lifecycle-best-practices-slurm-slurm-update-cluster-lifecycle.html")
HYPERPOD_UPDATE_CLUSTER = ("https://docs.aws.amazon.com/sagemaker/latest/dg/"
                           "sagemaker-hyperpod-eks-operate-cli-command-update-cluster.html")
HYPERPOD_AUTOSCALING = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html"
CFN_SAGEMAKER_CLUSTER = ("https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
                         "aws-resource-sagemaker-cluster.html")
PCLUSTER_UPDATE = "https://docs.aws.amazon.com/parallelcluster/latest/ug/using-pcluster-update-cluster-v3.html"
PCLUSTER_CFN = "https://docs.aws.amazon.com/parallelcluster/latest/ug/cfn-cluster-ops.html"

# ParallelCluster's update policy for the compute settings fmcluster renders (its schema declares one per setting;
# `pcluster update-cluster --dryrun` prints them). tests/diff checks this table against ParallelCluster's own checker.
PCLUSTER_POLICIES = {
    "InstanceType": "COMPUTE_FLEET_STOP",  # refused while the compute fleet runs
    "MinCount": "RESIZE_UPDATE_STRATEGY_ON_REMOVE",  # removing nodes: only with TERMINATE (or the fleet stopped)
    "SlurmQueues": "RESIZE_UPDATE_STRATEGY_ON_REMOVE",  # removing a queue: likewise
}
PCLUSTER_DEFAULT_POLICY = "QUEUE_UPDATE_STRATEGY"  # other queue settings: CustomActions, CapacityType, ...

def _rolling_jobs(u: NodeUnit) -> tuple:
    """(running jobs, sources) when a group's instances are replaced by the orchestrator's own update."""
    if u.service == "eks":
        if u.force_update:
            return ("die: the managed node group rolling update drains each node and, with ForceUpdateEnabled, "
                    "evicts pods regardless of PodDisruptionBudgets", [EKS_UPDATE])
        update = u.update_config or {}
        pace = (f"{update['MaxUnavailable']} node(s) at a time" if "MaxUnavailable" in update
                else f"{update['MaxUnavailablePercentage']}% of the nodes at a time"
                if "MaxUnavailablePercentage" in update else "EKS's default pace")
        order = ("each old node is terminated before its replacement launches (UpdateStrategy MINIMAL: no surge "
                 "instances)" if update.get("UpdateStrategy") == "MINIMAL" else "replacements launch first (surge)")
        return (f"die unless a PodDisruptionBudget holds them: the rolling update drains {pace}, {order}; a pod that "
                "cannot be evicted within 15 minutes fails the update instead (ForceUpdateEnabled off)",
                [EKS_UPDATE, EKS_UPDATE_CONFIG])
    if u.service == "pcs":
        return ("not documented: AWS PCS says new instances launch with the updated properties; what happens to "
                "running static instances is not stated (unverified); plan for the nodes to be replaced",
                [PCS_NODE_GROUP_UPDATE])
    if u.service == "hyperpod":
        return ("not documented per field: HyperPod's UpdateCluster applies the instance group change; treat running "
                "jobs on the group as at risk (unverified)", [HYPERPOD_UPDATE_CLUSTER])
    return _pcluster_jobs(u, PCLUSTER_DEFAULT_POLICY)


def _pcluster_jobs(u: NodeUnit, policy: str) -> tuple:
    """What ParallelCluster does with running jobs under an update policy and the cluster's QueueUpdateStrategy."""
    sources = [PCLUSTER_UPDATE, PCLUSTER_CFN]
    stop = ("blocked: ParallelCluster refuses this update while the compute fleet runs (update policy {p}; the "
            "CloudFormation custom resource does not stop the fleet, so the stack update fails); stopping the fleet "
            "first stops every running job")
    if policy == "COMPUTE_FLEET_STOP":
        return stop.format(p=policy), sources
    if policy == "RESIZE_UPDATE_STRATEGY_ON_REMOVE":
        if u.queue_update_strategy == "TERMINATE":
            return "die on the removed nodes: QueueUpdateStrategy TERMINATE stops them at once", sources
        return stop.format(p=f"{policy} with QueueUpdateStrategy {u.queue_update_strategy}"), sources
    if u.queue_update_strategy == "DRAIN":
        return "survive: QueueUpdateStrategy DRAIN lets running jobs finish before a node is replaced", sources
    if u.queue_update_strategy == "TERMINATE":
        return "die: QueueUpdateStrategy TERMINATE stops the nodes at once", sources
    return stop.format(p=f"{policy} without a QueueUpdateStrategy"), sources


def _terminated(u: NodeUnit, count: int, why: str) -> Finding:
    per = u.gpus // u.count if u.count else 0
    jobs = "die: the instances are terminated" if count else "none running"
    return Finding(NODES, u.key, f"{u.describe(count)} terminated: {why}", count * per, jobs)


def findings(old_units: Dict[str, NodeUnit], new_units: Dict[str, NodeUnit],
             changes: Dict[str, List[ResourceChange]], named: Optional[Dict[str, str]] = None) -> List[Finding]:
    """`named`: replaced resources that keep their custom name (place -> name): CloudFormation refuses those."""
    replaced = {c.where for cs in changes.values() for c in cs if c.action == REPLACED}
    touched = {c.where for cs in changes.values() for c in cs}
    out: List[Finding] = []
    for key in sorted(set(old_units) | set(new_units)):
        a, b = old_units.get(key), new_units.get(key)
        if a is None and b is not None:
            out.append(Finding(SAFE, key, f"new {b.service} group: {b.describe()} launched"))
            continue
        assert a is not None
        lost_capacity = bool(a.capacity) and (b is None or b.capacity != a.capacity or b.instance_type != a.instance_type)
        if lost_capacity:
            out.append(Finding(CAPACITY, key, f"{a.describe()} no longer use the reservation or plan "
                                              f"{', '.join(sorted(a.capacity))}"))
        where = f"{a.stack}/{a.logical_id}"
        if b is None:
            why = "the resource is replaced" if where in replaced else "the group is removed"
            gone = _terminated(a, a.count, why)
            if a.service == "parallelcluster" and where not in replaced:
                gone.jobs, gone.sources = _pcluster_jobs(a, PCLUSTER_POLICIES["SlurmQueues"])
            out.append(gone)
            continue
        if where in replaced and where in (named or {}):
            kind = next(c.type for cs in changes.values() for c in cs if c.where == where)
            out.append(Finding(NODES, key, f"{a.describe()}: a create-only property changed, so CloudFormation would "
                               f"replace the group; {refusals.refusal(kind, (named or {})[where])}", a.gpus,
                               "untouched: the update fails and rolls back; the ways through terminate the group's "
                               "instances (delete first) or need capacity for a second group (rename)",
                               [refusals.NAME_TYPE], fails=True))
            continue
        if where in replaced:
            out.append(_terminated(a, a.count, "CloudFormation replaces the group (a create-only property changed); "
                                               f"the new group launches {b.describe()}"))
            continue
        lt_changed = a.launch_template is not None and f"{a.stack}/{a.launch_template}" in touched
        rolled = a.instance_type != b.instance_type or a.config != b.config or lt_changed
        if a.service == "hyperpod" and not rolled and a.lifecycle != b.lifecycle:
            out.append(Finding(SAFE, key, "lifecycle scripts changed: HyperPod's UpdateCluster runs them only on new "
                                          "instances; running ones keep theirs", sources=[HYPERPOD_LIFECYCLE_UPDATE]))
        if rolled:
            jobs, sources = _rolling_jobs(a)
            if a.service == "parallelcluster" and a.instance_type != b.instance_type:
                jobs, sources = _pcluster_jobs(a, PCLUSTER_POLICIES["InstanceType"])
            what = "launch template changed" if lt_changed else "instance type changed" \
                if a.instance_type != b.instance_type else "configuration changed"
            out.append(Finding(NODES, key, f"{a.describe(min(a.count, b.count))} replaced by the orchestrator's update "
                                           f"({what})", min(a.count, b.count) * (a.gpus // a.count if a.count else 0),
                               jobs, sources))
            if a.capacity_block:
                surge = ("" if (a.update_config or {}).get("UpdateStrategy") == "MINIMAL" else
                         "; without UpdateStrategy MINIMAL the update also asks for surge instances the block cannot "
                         "supply")
                out.append(Finding(CAPACITY, key, "AWS asks that a Capacity Block node group be scaled to 0 before it "
                                                  f"is updated: scale it to 0 first, deploy, scale it back{surge}",
                                   sources=[EKS_CAPACITY_BLOCKS]))
        if a.autoscaled and where in touched:
            out.append(Finding(
                NODES, key, f"{a.instance_type} instance group scaled by HyperPod's Karpenter: this update of the "
                "HyperPod cluster sends every instance group again, this one with InstanceCount 0, the count it was "
                "created with; whether HyperPod then removes the nodes Karpenter started is not documented "
                "(AWS: an autoscaled group must start at 0, and Karpenter scales a group that starts with nodes down "
                "to 0)", 0,
                "unverified, so at risk: deploy while the group has no running pods (kubectl get nodes -l "
                f"fmcluster.io/node-group={key.rsplit('/', 1)[-1]}), or drain it first",
                [HYPERPOD_AUTOSCALING, CFN_SAGEMAKER_CLUSTER]))
        scaler = SCALERS.get(a.service)
        if scaler is not None:
            out.extend(scaler(a, b))
        elif b.count < a.count:
            gone = _terminated(a, a.count - b.count, f"count {a.count} -> {b.count}")
            if a.service == "parallelcluster":
                gone.jobs, gone.sources = _pcluster_jobs(a, PCLUSTER_POLICIES["MinCount"])
            out.append(gone)
        elif b.count > a.count:
            out.append(Finding(SAFE, key, f"count {a.count} -> {b.count}: {b.describe(b.count - a.count)} launched"))
    return out

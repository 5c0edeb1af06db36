"""`fmcluster status` for SageMaker HyperPod on EKS: the HyperPod cluster (state, instance groups and their nodes),
the EKS cluster (add-ons; HyperPod's nodes are not EKS node groups), the task-governance policy and team quotas."""

from __future__ import annotations

from typing import Dict

from fmcluster.aws.context import Context
from fmcluster.aws.status import Describer, Item, arn_id, health
from fmcluster.platforms.hyperpod.status import DESCRIBERS as HYPERPOD
from fmcluster.platforms.kubernetes.status import DESCRIBERS as EKS

CREATED = {"Created", "Updated"}
CHANGING = {"Creating", "Updating", "Deleting"}


def _quota(ctx: Context, pid: str) -> Item:
    q = ctx.client("sagemaker").describe_compute_quota(ComputeQuotaId=arn_id(pid, "compute-quota"))
    state = q.get("Status", "?")
    team = q.get("ComputeQuotaTarget", {}).get("TeamName", "?")
    resources = q.get("ComputeQuotaConfig", {}).get("ComputeQuotaResources", [])
    held = ", ".join(f"{r.get('Accelerators', r.get('Count', '?'))} x {r.get('InstanceType', '?')}" for r in resources)
    return Item("team quota", f"{q.get('Name', pid)} (team {team})",
                f"{state} {q.get('ActivationState', '')} {held}".strip(), health(state, CREATED, CHANGING),
                q.get("FailureReason", ""))


def _policy(ctx: Context, pid: str) -> Item:
    c = ctx.client("sagemaker").describe_cluster_scheduler_config(
        ClusterSchedulerConfigId=arn_id(pid, "cluster-scheduler-config"))
    state = c.get("Status", "?")
    sc = c.get("SchedulerConfig", {})
    classes = ", ".join(f"{p.get('Name')} {p.get('Weight')}" for p in sc.get("PriorityClasses", []))
    return Item("cluster policy", c.get("Name", pid),
                f"{state} fair share {sc.get('FairShare', '?')}, priorities {classes or 'none'}",
                health(state, CREATED, CHANGING), c.get("FailureReason", ""))


DESCRIBERS: Dict[str, Describer] = {
    **HYPERPOD,
    **EKS,
    "AWS::SageMaker::ComputeQuota": ("sagemaker", _quota),
    "AWS::SageMaker::ClusterSchedulerConfig": ("sagemaker", _policy),
}

"""`fmcluster job rl` on HyperPod on EKS: task governance's ClusterQueues are HyperPod's, generated from the teams'
compute quotas, so the RayJob is held to what the team's quota and its nodes give (docs/post-training.md)."""

from __future__ import annotations

import argparse

import yaml
from platforms.kubernetes import kueue_rules

from fmcluster.cli.posttraining_command import render_rl
from fmcluster.platforms.kubernetes import kuberay
from fmcluster.registry import load_spec


def args(**kw) -> argparse.Namespace:
    base = {"group": None, "nodes": None, "model": None, "image": None, "rollout_tp": None, "dataset": None}
    return argparse.Namespace(**{**base, **kw})


def test_on_hyperpod_the_rayjob_is_the_teams_whole_quota_on_schedulable_nodes():
    """Task governance's ClusterQueues are HyperPod's, generated from the teams' compute quotas: the RayJob goes to the
    team's local queue with its priority class, asks for the team's GPUs on the group and no more, each pod fits a
    node (the head with KubeRay's sidecar submitter beside Ray), and asks for no hugepages (undocumented whether task
    governance covers them; an uncovered resource keeps the workload pending: docs/hyperpod-eks.md)."""
    from fmcluster.orchestrators.hyperpod_eks import governance
    from fmcluster.orchestrators.hyperpod_eks.settings import PRIORITY_CLASS_SUFFIX
    from fmcluster.platforms.kubernetes import allocatable

    spec = load_spec("examples/hyperpod-eks-p5.yaml")
    group, tg = spec.node_groups[0], spec.orchestrator.task_governance
    (job,) = yaml.safe_load_all(render_rl(spec, args(), "spec.yaml"))
    team = next(t for t in tg.teams if t.namespace == job["metadata"]["namespace"])
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": team.local_queue,
                                         "kueue.x-k8s.io/priority-class": f"training{PRIORITY_CLASS_SUFFIX}"}
    cluster = job["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]["spec"]
    head = {**head, "containers": [*head["containers"], {"name": "ray-job-submitter",
                                                          "resources": kuberay.SIDECAR_SUBMITTER}]}
    pods = [(head, 1)] + [(g["template"]["spec"], g["replicas"]) for g in cluster["workerGroupSpecs"]]
    node = allocatable.allocatable(group.instance, spec.orchestrator.hyperpod.threads_per_core)
    quota = governance.compute_quota(spec, team, "arn")["ComputeQuotaConfig"]["ComputeQuotaResources"]
    (share,) = [r for r in quota if r["InstanceType"] == f"ml.{group.instance_type}" and "Accelerators" in r]
    gpus = 0
    for pod, count in pods:
        assert pod["nodeSelector"]["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"
        assert not kueue_rules.node_fit_problems(pod, node)
        requests = kueue_rules.podset_requests(pod, count, {}, {})
        assert not any(k.startswith("hugepages-") for k in requests)
        gpus += int(requests["nvidia.com/gpu"])
    assert gpus == share["Accelerators"] == team.gpus[group.name]

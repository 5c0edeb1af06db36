"""The fabric acceptance job on HyperPod on EKS (examples/jobs/nccl-tests-hyperpod.yaml): a team's queue and
priority class, within the team's quota, on nodes HyperPod reports healthy."""

from __future__ import annotations

from helpers import ROOT
from helpers.jobs import objects, pods
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.hyperpod_eks.settings import LOCAL_QUEUE_SUFFIX, PRIORITY_CLASS_SUFFIX
from fmcluster.platforms.kubernetes import allocatable, labels
from fmcluster.registry import load_spec


def test_the_hyperpod_job_goes_through_a_teams_queue_onto_healthy_nodes():
    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")
    (group,) = spec.gpu_groups
    job = objects("nccl-tests-hyperpod.yaml")["MPIJob"]
    team = next(t for t in spec.orchestrator.task_governance.teams if t.namespace == job["metadata"]["namespace"])
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == f"{team.namespace}{LOCAL_QUEUE_SUFFIX}"
    priority = job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    assert priority[: -len(PRIORITY_CLASS_SUFFIX)] in {p.name for p in spec.orchestrator.task_governance.priority_classes}
    for role, count, pod in pods(job):
        validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": team.namespace},
                  "spec": pod}, spec.orchestrator.eks.kubernetes_version)
        if role == "Worker":
            assert count * group.instance.gpus <= team.gpus[group.name], "within the team's own quota"
            (container,) = pod["containers"]
            assert container["resources"]["requests"][labels.EFA_RESOURCE] == group.instance.efa_interfaces
            assert pod["nodeSelector"] == {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}
            # ThreadsPerCore 1: 96 logical CPUs on p5.48xlarge; the pod must fit what one node can hold
            node = allocatable.allocatable(group.instance, spec.orchestrator.hyperpod.threads_per_core)
            assert kueue_rules.node_fit_problems(pod, node) == []

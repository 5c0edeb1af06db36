"""The fabric acceptance job on HyperPod on EKS: `fmcluster job nccl` writes it from the spec
(examples/jobs/nccl-tests-hyperpod.yaml is its written-out form for examples/hyperpod-eks-p5.yaml): a team's queue and
priority class, within the team's quota, on nodes HyperPod reports healthy."""

from __future__ import annotations

import pytest
import yaml
from helpers import ROOT
from helpers.jobs import objects, pods
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.hyperpod_eks.settings import LOCAL_QUEUE_SUFFIX, PRIORITY_CLASS_SUFFIX
from fmcluster.platforms.kubernetes import allocatable, labels
from fmcluster.registry import load_spec

EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("hyperpod-eks-*.yaml"))


def generated(spec, example: str) -> dict:
    (group,) = spec.gpu_groups
    text = spec.orchestrator_kind.fabric_job(spec, group, image=None, spec_file=f"examples/{example}")
    return {o["kind"]: o for o in yaml.safe_load_all(text)}


def test_the_generated_job_is_the_example_job():
    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")
    assert generated(spec, "hyperpod-eks-p5.yaml") == objects("nccl-tests-hyperpod.yaml")


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_job_goes_through_a_teams_queue_onto_healthy_nodes(example):
    spec = load_spec(ROOT / "examples" / example)
    (group,) = spec.gpu_groups
    job = generated(spec, example)["MPIJob"]
    team = next(t for t in spec.orchestrator.task_governance.teams if t.namespace == job["metadata"]["namespace"])
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == f"{team.namespace}{LOCAL_QUEUE_SUFFIX}"
    priority = job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    assert priority[: -len(PRIORITY_CLASS_SUFFIX)] in {p.name for p in spec.orchestrator.task_governance.priority_classes}
    for role, count, pod in pods(job):
        validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": team.namespace},
                  "spec": pod}, spec.orchestrator.eks.kubernetes_version)
        if role == "Worker":
            assert 2 <= count and count * group.instance.gpus <= team.gpus[group.name], "within the team's own quota"
            (container,) = pod["containers"]
            assert container["resources"]["requests"][labels.EFA_RESOURCE] == group.instance.efa_interfaces
            assert pod["nodeSelector"] == {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}
            # ThreadsPerCore 1: 96 logical CPUs on p5.48xlarge; the pod must fit what one node can hold
            node = allocatable.allocatable(group.instance, spec.orchestrator.hyperpod.threads_per_core)
            assert kueue_rules.node_fit_problems(pod, node) == []


def test_a_team_quota_under_two_nodes_is_refused_with_the_field():
    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")
    tg = spec.orchestrator.task_governance
    small = tg.model_copy(update={"teams": [t.model_copy(update={"gpus": {"h100": 8}}) for t in tg.teams]})
    one_node = spec.model_copy(update={"orchestrator": spec.orchestrator.model_copy(update={"task_governance": small})})
    with pytest.raises(ValueError, match="task_governance.teams"):
        spec.orchestrator_kind.fabric_job(one_node, spec.gpu_groups[0], image=None, spec_file="x.yaml")

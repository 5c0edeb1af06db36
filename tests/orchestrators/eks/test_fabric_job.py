"""The fabric acceptance job on EKS: `fmcluster job nccl` writes it from the spec (examples/jobs/nccl-tests-eks.yaml
is its written-out form for examples/eks-p5.yaml); valid Pods, admitted whole through the cluster's Kueue queue with
every GPU and EFA interface of the group."""

from __future__ import annotations

import pytest
import yaml
from helpers import ROOT
from helpers.jobs import objects, pods
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.eks import kueue
from fmcluster.platforms.kubernetes import allocatable, devices, labels
from fmcluster.registry import load_spec

EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("eks-*.yaml"))


def generated(example: str) -> dict:
    spec = load_spec(ROOT / "examples" / example)
    (group,) = spec.gpu_groups
    text = spec.orchestrator_kind.fabric_job(spec, group, image=None, spec_file=f"examples/{example}")
    return {o["kind"]: o for o in yaml.safe_load_all(text)}


def admitted_whole(spec, job) -> None:
    settings = spec.orchestrator.eks
    (group,) = spec.gpu_groups
    assert job["metadata"]["namespace"] == settings.training_namespace
    assert job["metadata"]["labels"] == {kueue.QUEUE_LABEL: kueue.QUEUE}
    assert "kubeflow.org/mpijob" in kueue.FRAMEWORKS
    (cq,) = [o for o in kueue.queue_objects(spec.node_groups, settings) if o["kind"] == "ClusterQueue"]
    claims = (devices.efa_claim_templates(spec.node_groups, job["metadata"]["namespace"])
              if settings.efa_device == "dra" else [])
    for role, count, pod in pods(job):
        validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "training"}, "spec": pod},
                 settings.kubernetes_version)
        charged = kueue_rules.admit(pod, count, claims, kueue.configuration(settings), cq)
        if role == "Worker":
            assert kueue_rules.node_fit_problems(pod, allocatable.allocatable(group.instance)) == []
            assert count == group.count
            assert charged[labels.GPU_RESOURCE] == group.count * group.instance.gpus
            assert charged[labels.EFA_RESOURCE] == group.count * group.instance.efa_interfaces


def test_the_generated_job_is_the_example_job():
    assert generated("eks-p5.yaml") == objects("nccl-tests-eks.yaml")


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_generated_job_is_valid_and_admitted_whole_through_the_queue(example):
    admitted_whole(load_spec(ROOT / "examples" / example), generated(example)["MPIJob"])


def test_the_job_is_packed_under_the_lowest_network_layer_of_the_type():
    job = generated("eks-p6-b200-capacity-block.yaml")["MPIJob"]
    annotations = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"]
    assert annotations == {kueue.PREFERRED_TOPOLOGY: "topology.k8s.aws/network-node-layer-4"}  # p6-b200: 4 layers


def test_with_volcano_the_job_is_refused_with_where_to_start():
    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    volcano = spec.model_copy(update={"orchestrator": spec.orchestrator.model_copy(update={
        "eks": spec.orchestrator.eks.model_copy(update={"scheduler": "volcano"})})})
    with pytest.raises(ValueError, match="nccl-tests-eks.yaml"):
        spec.orchestrator_kind.fabric_job(volcano, spec.gpu_groups[0], image=None, spec_file="x.yaml")


def test_the_generated_job_says_the_mpi_operator_comes_first():
    """fmcluster does not install the MPI operator on EKS: the job's own instructions install the pinned release."""
    from fmcluster.orchestrators.eks.first_job import MPI_OPERATOR_MANIFEST

    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    text = spec.orchestrator_kind.fabric_job(spec, spec.gpu_groups[0], image=None, spec_file="examples/eks-p5.yaml")
    assert f"kubectl apply --server-side -f {MPI_OPERATOR_MANIFEST}" in text
    assert MPI_OPERATOR_MANIFEST in (ROOT / "examples" / "jobs" / "nccl-tests-eks.yaml").read_text()

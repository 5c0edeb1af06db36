"""The fabric acceptance job on EKS (examples/jobs/nccl-tests-eks.yaml): valid Pods, admitted whole through the
cluster's Kueue queue with every GPU and EFA interface of the group."""

from __future__ import annotations

from helpers import ROOT
from helpers.jobs import objects, pods
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.eks import kueue
from fmcluster.platforms.kubernetes import allocatable, labels
from fmcluster.registry import load_spec


def test_the_eks_job_is_valid_and_admitted_whole_through_the_queue():
    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    settings = spec.orchestrator.eks
    (group,) = spec.gpu_groups
    job = objects("nccl-tests-eks.yaml")["MPIJob"]
    assert job["metadata"]["namespace"] == settings.training_namespace
    assert job["metadata"]["labels"] == {kueue.QUEUE_LABEL: kueue.QUEUE}
    assert "kubeflow.org/mpijob" in kueue.FRAMEWORKS
    (cq,) = [o for o in kueue.queue_objects(spec.node_groups, settings) if o["kind"] == "ClusterQueue"]
    for role, count, pod in pods(job):
        validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "training"}, "spec": pod},
                 settings.kubernetes_version)
        charged = kueue_rules.admit(pod, count, [], kueue.configuration(settings), cq)
        if role == "Worker":
            assert kueue_rules.node_fit_problems(pod, allocatable.allocatable(group.instance)) == []
            assert count == group.count
            assert charged[labels.GPU_RESOURCE] == group.count * group.instance.gpus
            assert charged[labels.EFA_RESOURCE] == group.count * group.instance.efa_interfaces


def test_the_job_command_refuses_and_says_the_mpi_operator_comes_first(capsys):
    import argparse

    import pytest

    from fmcluster.cli.errors import UsageError
    from fmcluster.cli.job_command import MPI_OPERATOR_MANIFEST, cmd_job_nccl

    with pytest.raises(UsageError) as refused:
        cmd_job_nccl(argparse.Namespace(file=str(ROOT / "examples" / "eks-p5.yaml"), group=None, out=None))
    assert "MPI operator" in str(refused.value) and MPI_OPERATOR_MANIFEST in str(refused.value)
    # the manifest's own instructions install the same release
    assert MPI_OPERATOR_MANIFEST in (ROOT / "examples" / "jobs" / "nccl-tests-eks.yaml").read_text()

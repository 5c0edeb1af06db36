"""Checkpoints on HyperPod on EKS: examples/jobs/resume-train-hyperpod.yaml resumes from the newest complete checkpoint
of examples/hyperpod-eks-p5.yaml's tier with HyperPod job auto-resume; the managed tier of
examples/hyperpod-eks-p5en-training-plan.yaml turns on TieredStorageConfig with the spec's memory share."""

from __future__ import annotations

import shlex

import pytest
from helpers import resources_of
from helpers.jobs import objects
from helpers.resume_jobs import RESUME, ROOT, problems_with_checkpoints
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.hyperpod_eks import nodes
from fmcluster.registry import load_spec
from fmcluster.spec.checkpoints import paths


@pytest.fixture(scope="module")
def job_objects():
    return objects("resume-train-hyperpod.yaml")


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")


def test_hyperpod_restarts_the_job_on_healthy_nodes_after_replacing_a_failed_one(job_objects):
    job = job_objects["PyTorchJob"]
    annotations = job["metadata"]["annotations"]
    assert annotations["sagemaker.amazonaws.com/enable-job-auto-resume"] == "true"
    assert int(annotations["sagemaker.amazonaws.com/job-max-retry-count"]) >= 3
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert replica["restartPolicy"] == "OnFailure"
        assert replica["template"]["spec"]["nodeSelector"] == {nodes.HEALTH_STATUS: "Schedulable"}


def test_the_pods_are_valid_and_run_the_example_scripts(job_objects, spec):
    validate(job_objects["ConfigMap"], spec.orchestrator.eks.kubernetes_version)
    data = job_objects["ConfigMap"]["data"]
    assert data["train.py"] == (RESUME / "train.py").read_text()
    assert data["checkpoint_dir.py"] == (RESUME / "checkpoint_dir.py").read_text()
    for name, replica in job_objects["PyTorchJob"]["spec"]["pytorchReplicaSpecs"].items():
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name.lower(), "namespace": "hyperpod-ns-research"},
               "spec": {**replica["template"]["spec"], "restartPolicy": replica["restartPolicy"]}}
        validate(pod, spec.orchestrator.eks.kubernetes_version)


def test_it_checkpoints_where_the_spec_says(job_objects, spec):
    (container,) = job_objects["PyTorchJob"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    argv = shlex.split(container["command"][-1])
    where = paths(spec)
    assert argv[argv.index("--tier") + 1] == spec.checkpoints.tier == "fsx"
    assert argv[argv.index("--durable") + 1] == f"{where.durable}/resume-train"
    assert argv[argv.index("--interval-minutes") + 1] == str(spec.checkpoints.interval_minutes)
    (group,) = spec.gpu_groups
    assert container["resources"]["limits"]["nvidia.com/gpu"] == group.instance.gpus


def test_the_managed_tier_turns_on_tiered_storage_with_the_specs_memory_share(synth_example):
    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5en-training-plan.yaml")
    assert spec.checkpoints.tier == "managed"
    template = synth_example("hyperpod-eks-p5en-training-plan")["hpeks-p5en-cluster"]
    (cluster,) = resources_of(template, "AWS::SageMaker::Cluster").values()
    assert cluster["Properties"]["TieredStorageConfig"] == {
        "Mode": "Enable", "InstanceMemoryAllocationPercentage": spec.checkpoints.memory_percent}


def test_file_tiers_leave_tiered_storage_off(synth_example):
    template = synth_example("hyperpod-eks-p5")["hpeks-p5-cluster"]
    (cluster,) = resources_of(template, "AWS::SageMaker::Cluster").values()
    assert "TieredStorageConfig" not in cluster["Properties"]


def test_the_managed_tier_needs_its_memory_share():
    assert problems_with_checkpoints("hyperpod-eks-p5", tier="managed") == [
        "checkpoints.memory_percent: tier managed needs the share of each node's memory HyperPod sets aside for "
        "checkpoints: 20-100 (https://docs.aws.amazon.com/sagemaker/latest/dg/managed-tier-checkpointing-setup.html)"]
    assert problems_with_checkpoints("hyperpod-eks-p5", tier="managed", memory_percent=20) == []

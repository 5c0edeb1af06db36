"""examples/jobs/resume-train-eks.yaml on examples/eks-p5.yaml: an Indexed Job whose pods come back when a node is
replaced (eviction after a short toleration, the Job re-creating the index, torchrun restarting its workers) and resume
from the newest complete checkpoint of the spec's tier; valid objects that fit the nodes; EKS refuses the managed
tier (a HyperPod feature)."""

from __future__ import annotations

import shlex

import pytest
from helpers.jobs import objects
from helpers.resume_jobs import RESUME, ROOT, problems_with_checkpoints
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import validate

from fmcluster.platforms.kubernetes import allocatable, kueue, labels
from fmcluster.platforms.storage.fsx_lustre.mount import CLAIM
from fmcluster.registry import load_spec
from fmcluster.spec.checkpoints import paths


@pytest.fixture(scope="module")
def job_objects():
    return objects("resume-train-eks.yaml")


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "examples" / "eks-p5.yaml")


def command(job):
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return shlex.split(container["command"][-1])


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_every_object_is_valid_and_the_scripts_are_the_examples(job_objects, spec):
    for obj in job_objects.values():
        validate(obj, spec.orchestrator.eks.kubernetes_version)
    data = job_objects["ConfigMap"]["data"]
    assert data["train.py"] == (RESUME / "train.py").read_text()
    assert data["checkpoint_dir.py"] == (RESUME / "checkpoint_dir.py").read_text()


def test_a_pod_lost_with_its_node_comes_back_and_the_others_restart_in_place(job_objects):
    job = job_objects["Job"]
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["backoffLimit"] >= 5
    assert pod["restartPolicy"] == "OnFailure"
    evictions = {t["key"]: t["tolerationSeconds"] for t in pod["tolerations"] if t["effect"] == "NoExecute"}
    assert evictions.keys() == {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
    assert all(seconds < 300 for seconds in evictions.values()), "sooner than the default 300 s"
    argv = command(job)
    assert int(argv[argv.index("torchrun") + 3].split("=")[1]) >= 1  # --max-restarts
    # the rendezvous is index 0's stable name under the headless Service, which a re-created pod keeps
    service = job_objects["Service"]
    assert pod["subdomain"] == service["metadata"]["name"] and service["spec"]["publishNotReadyAddresses"] is True
    assert "--rdzv-endpoint=resume-train-0.resume-train:29500" in argv


def test_it_checkpoints_where_the_spec_says(job_objects, spec):
    argv = command(job_objects["Job"])
    where = paths(spec)
    assert flag(argv, "--tier") == spec.checkpoints.tier == where.tier
    assert flag(argv, "--durable") == f"{where.durable}/resume-train"
    assert flag(argv, "--interval-minutes") == str(spec.checkpoints.interval_minutes)
    assert flag(argv, "--keep") == str(spec.checkpoints.keep)
    pod = job_objects["Job"]["spec"]["template"]["spec"]
    assert {"name": "fsx", "persistentVolumeClaim": {"claimName": CLAIM}} in pod["volumes"]


def test_one_pod_per_node_asks_for_every_gpu_and_efa_interface_and_fits(job_objects, spec):
    (group,) = spec.gpu_groups
    job = job_objects["Job"]
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == group.count
    assert f"--nnodes={group.count}" in command(job) and f"--nproc-per-node={group.instance.gpus}" in command(job)
    assert job["metadata"]["labels"] == {kueue.QUEUE_LABEL: kueue.QUEUE} and job["spec"]["suspend"] is True
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"][labels.GPU_RESOURCE] == group.instance.gpus
    assert container["resources"]["limits"][labels.EFA_RESOURCE] == group.instance.efa_interfaces
    assert int(container["resources"]["requests"]["cpu"]) == allocatable.whole_node_cpu_request(group.instance)
    assert kueue_rules.node_fit_problems(pod, allocatable.allocatable(group.instance)) == []


def test_the_managed_tier_is_refused_with_its_source():
    (problem,) = problems_with_checkpoints("eks-p5", tier="managed", memory_percent=20)
    assert problem.startswith("checkpoints.tier: orchestrator eks cannot honour tier managed: managed tiered "
                              "checkpointing is a feature of SageMaker HyperPod clusters orchestrated by Amazon EKS")

"""examples/jobs/nccl-allreduce.yaml runs on examples/eks-p5.yaml as written: valid objects for its Kubernetes
version, admitted through its queue, one pod per GPU node asking for every GPU and EFA interface of the node."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fmcluster.orchestrators.eks import kueue, labels, volumes
from fmcluster.spec import load_spec

from .schemas import validate

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def job_objects():
    return {o["kind"]: o for o in yaml.safe_load_all((ROOT / "examples" / "jobs" / "nccl-allreduce.yaml").read_text())}


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "examples" / "eks-p5.yaml")


def test_every_object_is_valid(job_objects, spec):
    for obj in job_objects.values():
        validate(obj, spec.orchestrator.eks.kubernetes_version)


def test_the_job_goes_through_the_queue_whole(job_objects, spec):
    job = job_objects["Job"]
    settings = spec.orchestrator.eks
    assert job["metadata"]["namespace"] == settings.training_namespace
    assert job["metadata"]["labels"] == {kueue.QUEUE_LABEL: kueue.QUEUE}
    assert job["spec"]["suspend"] is True, "Kueue unsuspends it once admitted"
    (group,) = spec.gpu_groups
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == group.count
    topology = job["spec"]["template"]["metadata"]["annotations"][kueue.PREFERRED_TOPOLOGY]
    assert topology in labels.topology_levels(group.instance_type)
    assert "tolerations" not in job["spec"]["template"]["spec"], "the flavor adds the GPU toleration"


def test_each_pod_asks_for_every_gpu_and_efa_interface_of_its_node(job_objects, spec):
    (group,) = spec.gpu_groups
    (container,) = job_objects["Job"]["spec"]["template"]["spec"]["containers"]
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    assert requests[labels.GPU_RESOURCE] == limits[labels.GPU_RESOURCE] == group.instance.gpus
    assert requests[labels.EFA_RESOURCE] == limits[labels.EFA_RESOURCE] == group.instance.efa_interfaces
    command = " ".join(container["command"])
    assert f"--nnodes={group.count} " in command and f"--nproc-per-node={group.instance.gpus} " in command
    assert '--node-rank="${JOB_COMPLETION_INDEX}"' in command
    assert int(requests["cpu"]) <= group.instance.vcpus
    assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]


def test_the_pods_mount_the_shared_file_system_claim(job_objects, spec):
    volumes_ = job_objects["Job"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "fsx", "persistentVolumeClaim": {"claimName": volumes.CLAIM}} in volumes_
    assert spec.storage.fsx is not None


def test_the_benchmark_script_compiles(job_objects):
    compile(job_objects["ConfigMap"]["data"]["allreduce.py"], "allreduce.py", "exec")

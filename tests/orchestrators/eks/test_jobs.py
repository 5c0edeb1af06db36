"""examples/jobs/nccl-allreduce.yaml runs on examples/eks-p5.yaml as written: valid objects for its Kubernetes
version, admitted through its queue, one pod per GPU node asking for every GPU and EFA interface of the node. Its DRA
form (EFA devices from the group's ResourceClaimTemplate, as docs/eks.md shows) is admitted on
examples/eks-p6-b200-capacity-block.yaml. Admission follows Kueue's own rules (kueue_rules)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import validate

from fmcluster.platforms.kubernetes import allocatable, devices, kueue, labels
from fmcluster.platforms.storage.fsx_lustre.mount import CLAIM
from fmcluster.registry import load_spec

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
    assert int(requests["cpu"]) == allocatable.whole_node_cpu_request(group.instance)
    assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]


def test_the_pods_mount_the_shared_file_system_claim(job_objects, spec):
    volumes_ = job_objects["Job"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "fsx", "persistentVolumeClaim": {"claimName": CLAIM}} in volumes_
    assert spec.storage.fsx is not None


def test_the_benchmark_script_compiles(job_objects):
    compile(job_objects["ConfigMap"]["data"]["allreduce.py"], "allreduce.py", "exec")


def rendered_kueue(spec):
    """The Configuration, ClusterQueue and EFA claim templates fmcluster renders for `spec`."""
    settings = spec.orchestrator.eks
    (cq,) = [o for o in kueue.queue_objects(spec.node_groups, settings) if o["kind"] == "ClusterQueue"]
    claims = devices.efa_claim_templates(spec.node_groups, settings.training_namespace) \
        if settings.efa_device == "dra" else []
    return kueue.configuration(settings), cq, claims


def dra_pod_spec(pod_spec, group):
    """The job's pod for `group` with EFA from the DRA driver: every GPU, the group's claim template instead of
    vpc.amazonaws.com/efa."""
    pod = copy.deepcopy(pod_spec)
    (container,) = pod["containers"]
    for side in ("requests", "limits"):
        container["resources"][side].pop(labels.EFA_RESOURCE)
        container["resources"][side][labels.GPU_RESOURCE] = group.instance.gpus
    container["resources"]["claims"] = [{"name": "efa"}]
    pod["resourceClaims"] = [{"name": "efa", "resourceClaimTemplateName": devices.efa_claim_template_name(group)}]
    return pod


def test_one_worker_pod_fits_one_node_as_topology_aware_scheduling_places_it(job_objects, spec):
    (group,) = spec.gpu_groups
    pod = job_objects["Job"]["spec"]["template"]["spec"]
    assert kueue_rules.node_fit_problems(pod, allocatable.allocatable(group.instance)) == []


def test_a_pod_asking_for_more_hugepages_than_the_efa_driver_reserves_never_fits(spec):
    (group,) = spec.gpu_groups
    pod = {"containers": [{"name": "c", "resources": {"requests": {"hugepages-2Mi": "10258Mi", "cpu": "96"}}}]}
    assert kueue_rules.node_fit_problems(pod, allocatable.allocatable(group.instance)) == [
        "hugepages-2Mi: 1.07563e+10 > node allocatable 1.07542e+10"]


def test_kueue_admits_the_job_on_the_plugin_cluster(job_objects, spec):
    config, cq, claims = rendered_kueue(spec)
    job = job_objects["Job"]
    charged = kueue_rules.admit(job["spec"]["template"]["spec"], job["spec"]["parallelism"], claims, config, cq)
    assert charged[labels.EFA_RESOURCE] == 4 * 32 and "hugepages-2Mi" not in charged


def test_kueue_admits_the_dra_job_on_the_b200_cluster(job_objects):
    b200 = load_spec(ROOT / "examples" / "eks-p6-b200-capacity-block.yaml")
    assert b200.orchestrator.eks.efa_device == "dra" and b200.orchestrator.eks.scheduler == "kueue"
    (group,) = b200.gpu_groups
    config, cq, claims = rendered_kueue(b200)
    pod = dra_pod_spec(job_objects["Job"]["spec"]["template"]["spec"], group)
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "training"}, "spec": pod},
             b200.orchestrator.eks.kubernetes_version)
    charged = kueue_rules.admit(pod, group.count, claims, config, cq)
    assert charged[labels.EFA_RESOURCE] == group.count * group.instance.efa_interfaces == 16
    assert charged[labels.GPU_RESOURCE] == 16
    with pytest.raises(kueue_rules.Inadmissible, match="unavailable in ClusterQueue|insufficient quota"):
        kueue_rules.admit(pod, group.count + 1, claims, config, cq)


def test_the_docs_dra_snippet_is_the_rendered_claim():
    """docs/eks.md and README.md show how a pod claims its EFA devices with the DRA driver: by the rendered name."""
    b200 = load_spec(ROOT / "examples" / "eks-p6-b200-capacity-block.yaml")
    (group,) = b200.gpu_groups
    name = devices.efa_claim_template_name(group)
    assert f"resourceClaimTemplateName: {name}" in (ROOT / "docs" / "eks.md").read_text()
    assert "efa-<group>" in (ROOT / "README.md").read_text()

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

from fmcluster.platforms.kubernetes import allocatable, devices, kueue, labels
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


def test_the_launcher_runs_on_a_system_node_and_leaves_each_gpu_node_to_its_worker():
    """Each worker takes its GPU node's CPU but the DaemonSets' allowance, so the launcher's 2 CPUs cannot sit beside
    one (they left 0.45 CPU for every DaemonSet of a p5 node): Kueue charges the launcher to the system nodes' flavor,
    which only pod sets tolerating its taint reach, and the scheduler follows its node selector there."""
    for example in EXAMPLES:
        spec = load_spec(ROOT / "examples" / example)
        settings = spec.orchestrator.eks
        (group,) = spec.gpu_groups
        objects_ = kueue.queue_objects(spec.node_groups, settings)
        (cq,) = [o for o in objects_ if o["kind"] == "ClusterQueue"]
        flavors = {o["metadata"]["name"]: o for o in objects_ if o["kind"] == "ResourceFlavor"}
        claims = ({t["metadata"]["name"]: t for t in devices.efa_claim_templates(spec.node_groups, "training")}
                  if settings.efa_device == "dra" else {})
        job = generated(example)["MPIJob"]
        placed = {}
        for role, replica in job["spec"]["mpiReplicaSpecs"].items():
            requests = kueue_rules.podset_requests(replica["template"]["spec"], replica["replicas"], claims,
                                                   kueue.configuration(settings))
            placed[role] = kueue_rules.flavor_for(replica["template"], requests, cq, flavors)
        assert placed == {"Launcher": kueue.SYSTEM_FLAVOR, "Worker": group.name}, example
        launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        assert launcher["nodeSelector"] == {labels.GROUP: "system"}
        (worker,) = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        left = allocatable.allocatable(group.instance)["cpu"] - float(worker["resources"]["requests"]["cpu"])
        assert left >= allocatable.DAEMONSET_CPU_MILLICORES / 1000, example


def test_a_job_that_does_not_ask_for_the_system_nodes_is_never_charged_to_them():
    """The system flavor is the launcher's: a pod set that does not tolerate its taint (any other job) skips it."""
    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    objects_ = kueue.queue_objects(spec.node_groups, spec.orchestrator.eks)
    (cq,) = [o for o in objects_ if o["kind"] == "ClusterQueue"]
    flavors = {o["metadata"]["name"]: o for o in objects_ if o["kind"] == "ResourceFlavor"}
    with pytest.raises(kueue_rules.Inadmissible, match="untolerated taint .* in flavor system"):
        kueue_rules.flavor_for({"spec": {"containers": [{"name": "c"}]}}, {"cpu": 10_000}, cq, flavors)


def test_each_worker_asks_for_hugepages_as_aws_efa_jobs_do_and_its_node_holds_them():
    """AWS's EFA MPIJob (EKS user guide) asks each worker for 5120Mi of hugepages-2Mi, from the 5128 pages the EFA
    driver pre-allocates; Kueue leaves them out of quota and topology-aware scheduling fits them to the node."""
    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    (group,) = spec.gpu_groups
    worker = generated("eks-p5.yaml")["MPIJob"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    resources = worker["containers"][0]["resources"]
    assert resources["requests"]["hugepages-2Mi"] == resources["limits"]["hugepages-2Mi"] == "5120Mi"
    assert kueue_rules.node_fit_problems(worker, allocatable.allocatable(group.instance)) == []
    assert "hugepages-2Mi" not in kueue_rules.podset_requests(worker, 1, {}, kueue.configuration(spec.orchestrator.eks))


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

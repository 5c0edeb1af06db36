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


def test_the_launcher_runs_on_a_system_node_charged_to_the_teams_share_of_it():
    """Beside a worker that takes its GPU node's CPUs the launcher would leave the DaemonSets nothing: it goes to the
    system group, and each team's compute quota holds enough of the system instance type for it (task governance's
    Kueue admits a pod set only against the team's quota)."""
    from fmcluster.orchestrators.hyperpod_eks import governance
    from fmcluster.orchestrators.hyperpod_eks.settings import LAUNCHER_MEMORY_GIB, LAUNCHER_VCPUS
    from fmcluster.platforms.kubernetes import fabric_job

    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")
    system = spec.orchestrator.hyperpod.system_instance_type
    job = generated(spec, "hyperpod-eks-p5.yaml")["MPIJob"]
    launcher = dict((role, pod) for role, _, pod in pods(job))["Launcher"]
    assert launcher["nodeSelector"] == {labels.GROUP: "system", "node.kubernetes.io/instance-type": system}
    requests = launcher["containers"][0]["resources"]["requests"]
    assert requests == fabric_job.LAUNCHER_RESOURCES["requests"] == {"cpu": str(LAUNCHER_VCPUS),
                                                                       "memory": f"{LAUNCHER_MEMORY_GIB}Gi"}
    for team in spec.orchestrator.task_governance.teams:
        resources = governance.compute_quota(spec, team, "arn")["ComputeQuotaConfig"]["ComputeQuotaResources"]
        share = next(r for r in resources if r["InstanceType"] == system)
        assert share["VCpu"] >= LAUNCHER_VCPUS and share["MemoryInGiB"] >= LAUNCHER_MEMORY_GIB
        assert "Accelerators" not in share


def test_the_workers_cpu_is_the_nodes_less_the_kubelets_reserve_and_what_its_daemonsets_request():
    """Each DaemonSet on a HyperPod GPU node with its source (node_requests), fmcluster's own read from their
    manifests, and one allowance for what no source publishes: p5.48xlarge at ThreadsPerCore 1 has 96 CPUs."""
    from fmcluster.orchestrators.hyperpod_eks import node_requests

    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")
    (group,) = spec.gpu_groups
    table = node_requests.gpu_node_requests(spec, group.instance_type)
    by_name = {r.daemonset: r for r in table}
    assert by_name["health-monitoring-agent (HyperPod's chart)"].millicores == 500
    assert by_name["health-monitoring-agent (HyperPod's chart)"].exact, "read in the pinned chart"
    assert {"node-exporter, dcgm-exporter (fmcluster)", "node gate (fmcluster)"} <= set(by_name)
    assert all(r.source for r in table) and sum(not r.exact for r in table) >= 1
    reserved = node_requests.reserved_millicores(spec, group.instance_type)
    vcpus = allocatable.node_vcpus(group.instance, spec.orchestrator.hyperpod.threads_per_core)
    expected = (vcpus * 1000 - allocatable.kube_reserved_cpu_millicores(vcpus) - reserved) // 1000
    job = generated(spec, "hyperpod-eks-p5.yaml")["MPIJob"]
    worker = dict((role, pod) for role, _, pod in pods(job))["Worker"]
    assert worker["containers"][0]["resources"]["requests"]["cpu"] == str(int(expected)) == "93"


def test_more_teams_than_the_system_group_holds_launchers_for_are_refused():
    from fmcluster.orchestrators.hyperpod_eks.settings import spec_rules

    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")
    tg = spec.orchestrator.task_governance
    many = [tg.teams[0].model_copy(update={"name": f"t{i}", "gpus": {"h100": 1}}) for i in range(9)]
    hp = spec.orchestrator.hyperpod.model_copy(update={"system_count": 2})
    crowded = spec.model_copy(update={"orchestrator": spec.orchestrator.model_copy(
        update={"hyperpod": hp, "task_governance": tg.model_copy(update={"teams": many})})})
    problems = [m for path, m in spec_rules(crowded) if path == "orchestrator.task_governance.teams"]
    assert any("for MPI launchers" in m and "36 vCPUs" in m and "has 32" in m for m in problems), problems


def test_the_job_keeps_its_efa_request_and_its_header_says_how_to_see_whether_task_governance_admits_it():
    """Whether task governance's ClusterQueues cover vpc.amazonaws.com/efa is not published: the job keeps the
    request (without it NCCL silently uses TCP) and names the commands that show which way it went."""
    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")
    (group,) = spec.gpu_groups
    text = spec.orchestrator_kind.fabric_job(spec, group, image=None, spec_file="examples/hyperpod-eks-p5.yaml")
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "that its ClusterQueues cover vpc.amazonaws.com/efa" in header
    assert "kubectl -n hyperpod-ns-research describe workload" in header and "report what task governance" in header
    worker = dict((role, pod) for role, _, pod in pods(generated(spec, "hyperpod-eks-p5.yaml")["MPIJob"]))["Worker"]
    assert worker["containers"][0]["resources"]["limits"][labels.EFA_RESOURCE] == group.instance.efa_interfaces


def test_the_node_plugins_of_the_csi_drivers_the_cluster_installs_are_left_their_cpu():
    """Read off the registered stores (their CsiAddon), never named here: the file system's driver on every cluster,
    the Mountpoint for S3 driver where the spec mounts the store or serving streams weights from S3."""
    from fmcluster.orchestrators.hyperpod_eks import node_requests

    def plugins(example: str) -> dict:
        return {r.daemonset: r.millicores for r in node_requests.csi_node_plugins(load_spec(ROOT / "examples" / example))}

    p5, serving = plugins("hyperpod-eks-p5.yaml"), plugins("hyperpod-eks-p5en-serving.yaml")
    assert p5 == {"aws-fsx-csi-driver node plugin (add-on)": 30}
    assert serving == {**p5, "aws-mountpoint-s3-csi-driver node plugin (add-on)": 10}

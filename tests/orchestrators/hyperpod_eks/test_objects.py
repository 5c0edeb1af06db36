"""What fmcluster applies to a HyperPod on EKS cluster, read back from the synthesized template and validated against
the Kubernetes schema of its version: the node gate (tolerating HyperPod's health taint, adopting untainted nodes),
the exporters (kube-state-metrics exporting HyperPod's health labels for the alerts), the teams' claims of the shared
file system; and the example job that runs through task governance's queue with the auto-resume annotations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from helpers import resources_of
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.hyperpod_eks import nodes
from fmcluster.orchestrators.hyperpod_eks.settings import LOCAL_QUEUE_SUFFIX, PRIORITY_CLASS_SUFFIX, TEAM_NAMESPACE_PREFIX
from fmcluster.platforms.kubernetes import allocatable, labels, team_objects
from fmcluster.platforms.storage.fsx_lustre.mount import CLAIM
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parents[3]
VERSION = "1.33"  # the example's
# HyperPod runs its own managed Karpenter and installs these kinds itself; which Karpenter release (so which NodePool
# schema) it runs is not published, and no HyperpodNodeClass CRD is public, so no schema is vendored for them: their
# shape is checked in test_hyperpod_eks_elastic.py against the SageMaker guide's examples.
UNVENDORED = {("karpenter.sh/v1", "NodePool"), ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass")}


@pytest.fixture(scope="module")
def applied(synth_example) -> List[Dict[str, Any]]:
    template = synth_example("hyperpod-eks-p5")["hpeks-p5-cluster"]
    found: List[Dict[str, Any]] = []
    for res in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").values():
        manifest = res["Properties"]["Manifest"]
        text = manifest if isinstance(manifest, str) else "".join(p if isinstance(p, str) else "TOKEN"
                                                                  for p in manifest["Fn::Join"][1])
        found += json.loads(text)
    return found


def named(objects: List[Dict[str, Any]], kind: str, name: str) -> Dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def test_every_object_is_valid_for_the_clusters_kubernetes_version(applied):
    assert applied
    for obj in applied:
        if (obj["apiVersion"], obj["kind"]) not in UNVENDORED:
            validate(obj, VERSION)


def test_the_gate_adopts_untainted_nodes_and_runs_through_hyperpods_health_checks(applied):
    ds = named(applied, "DaemonSet", "fmcluster-node-gate")
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    assert "--adopt" in container["command"] and container["command"][container["command"].index("--policy") + 1] == "taint"
    assert nodes.HEALTH_TOLERATION in ds["spec"]["template"]["spec"]["tolerations"]
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0] == {"key": labels.GROUP, "operator": "In",
                                                                    "values": ["h100", "prep"]}


def test_the_exporters_export_hyperpods_health_labels_and_run_on_every_node(applied):
    ksm = named(applied, "Deployment", "kube-state-metrics")
    (container,) = ksm["spec"]["template"]["spec"]["containers"]
    allow = [a for a in container["args"] if a.startswith("--metric-labels-allowlist=")]
    assert allow == ["--metric-labels-allowlist=nodes=[" + ",".join(nodes.HEALTH_LABELS) + "]"]
    assert ksm["spec"]["template"]["spec"]["nodeSelector"] == {labels.GROUP: "system"}
    for name in ("node-exporter", "dcgm-exporter-hopper"):
        assert nodes.HEALTH_TOLERATION in named(applied, "DaemonSet", name)["spec"]["template"]["spec"]["tolerations"]


def wanted_objects(applied: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """What the team-objects Deployment creates in the teams' namespaces (its ConfigMap's objects.json)."""
    config = named(applied, "ConfigMap", team_objects.NAME)
    return json.loads(config["data"][team_objects.OBJECTS_FILE])


def test_each_team_claims_the_shared_file_system_in_its_namespace(applied):
    wanted = wanted_objects(applied)
    for team in ("research", "production"):
        ns = f"{TEAM_NAMESPACE_PREFIX}{team}"
        pvc = [c for c in wanted if c["metadata"]["namespace"] == ns and c["kind"] == "PersistentVolumeClaim"]
        assert len(pvc) == 1 and pvc[0]["metadata"]["name"] == CLAIM
        pv = named(applied, "PersistentVolume", f"hpeks-p5-{team}-fsx")
        assert pv["spec"]["claimRef"] == {"namespace": ns, "name": CLAIM}
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        assert pvc[0]["spec"]["volumeName"] == pv["metadata"]["name"]
        assert pvc[0]["spec"]["resources"] == {"requests": {"storage": pv["spec"]["capacity"]["storage"]}}
        validate(pvc[0], VERSION)
    assert [o["kind"] for o in wanted] == ["PersistentVolumeClaim"] * 2, "a file tier: no checkpoint service account"
    assert not [o for o in applied if o["metadata"].get("namespace", "").startswith(TEAM_NAMESPACE_PREFIX)], \
        "nothing is applied into a team's namespace by CloudFormation: it may not exist yet"
    assert not [o for o in applied if o["kind"] == "Namespace" and o["metadata"]["name"].startswith(
        TEAM_NAMESPACE_PREFIX)], "the teams' namespaces are task governance's: fmcluster never applies (or deletes) one"


def test_the_team_objects_deployment_reads_only_the_teams_namespaces_and_creates_only_claims(applied):
    role = named(applied, "ClusterRole", team_objects.NAME)
    namespaces = sorted(f"{TEAM_NAMESPACE_PREFIX}{t}" for t in ("research", "production"))
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"], "resourceNames": namespaces},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get"], "resourceNames": [CLAIM]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["create"]}]
    policy = named(applied, "ValidatingAdmissionPolicy", f"{team_objects.NAME}-claims")
    assert json.loads(policy["spec"]["variables"][0]["expression"]) == {
        f"{c['metadata']['namespace']}/{c['metadata']['name']}": c["spec"]["volumeName"]
        for c in wanted_objects(applied)}, "the cluster-wide create, confined to exactly the wanted claims"
    assert [p["metadata"]["name"] for p in applied if p["kind"] == "ValidatingAdmissionPolicy"] == \
        [f"{team_objects.NAME}-claims"]
    deployment = named(applied, "Deployment", team_objects.NAME)
    assert deployment["metadata"]["namespace"] == "fmcluster-system"
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {labels.GROUP: "system"}, \
        "the system group: it exists from the cluster's start"


def test_the_scraper_labels_series_with_ec2_instance_type_names(synth_example):
    import base64

    template = synth_example("hyperpod-eks-p5")["hpeks-p5-cluster"]
    ((_, scraper),) = resources_of(template, "AWS::APS::Scraper").items()
    config = yaml.safe_load(base64.b64decode(scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"]))
    node_job = next(j for j in config["scrape_configs"] if j["job_name"] == "node")
    (relabel,) = [r for r in node_job["relabel_configs"] if r.get("target_label") == "instance_type"]
    assert relabel["regex"] == r"(?:ml\.)?(.*)"


# --- the example job -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def job_objects():
    return {o["kind"]: o for o in yaml.safe_load_all((ROOT / "examples" / "jobs" / "nccl-allreduce-hyperpod.yaml")
                                                      .read_text())}


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")


def test_the_job_goes_through_a_teams_queue_with_a_priority_class(job_objects, spec):
    job = job_objects["PyTorchJob"]
    tg = spec.orchestrator.task_governance
    team = next(t for t in tg.teams if t.namespace == job["metadata"]["namespace"])
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == f"{team.namespace}{LOCAL_QUEUE_SUFFIX}"
    priority = job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    assert priority.endswith(PRIORITY_CLASS_SUFFIX)
    assert priority[: -len(PRIORITY_CLASS_SUFFIX)] in {p.name for p in tg.priority_classes}
    assert job["spec"]["runPolicy"]["suspend"] is True
    assert job_objects["ConfigMap"]["metadata"]["namespace"] == team.namespace


def test_the_job_carries_the_auto_resume_annotations_and_restarts_on_failure(job_objects):
    job = job_objects["PyTorchJob"]
    annotations = job["metadata"]["annotations"]
    assert annotations["sagemaker.amazonaws.com/enable-job-auto-resume"] == "true"
    assert int(annotations["sagemaker.amazonaws.com/job-max-retry-count"]) >= 1
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert replica["restartPolicy"] == "OnFailure"
        pod = replica["template"]["spec"]
        assert pod["nodeSelector"] == {nodes.HEALTH_STATUS: "Schedulable"}


def test_the_job_fits_the_teams_quota_and_asks_for_every_gpu_and_efa_interface(job_objects, spec):
    job = job_objects["PyTorchJob"]
    (group,) = spec.gpu_groups
    team = next(t for t in spec.orchestrator.task_governance.teams if t.namespace == job["metadata"]["namespace"])
    replicas = sum(r["replicas"] for r in job["spec"]["pytorchReplicaSpecs"].values())
    assert replicas * group.instance.gpus <= team.gpus[group.name], "admitted within the team's own quota"
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        (container,) = replica["template"]["spec"]["containers"]
        assert container["name"] == "pytorch", "the Kubeflow training operator's container name"
        requests = container["resources"]["requests"]
        assert requests[labels.GPU_RESOURCE] == group.instance.gpus
        assert requests[labels.EFA_RESOURCE] == group.instance.efa_interfaces
        assert f"--nproc-per-node={group.instance.gpus} " in " ".join(container["command"])
        pod = replica["template"]["spec"]
        assert {"name": "fsx", "persistentVolumeClaim": {"claimName": CLAIM}} in pod["volumes"]
        node = allocatable.allocatable(group.instance, spec.orchestrator.hyperpod.threads_per_core)
        assert kueue_rules.node_fit_problems(pod, node) == [], "one pod fits one node (ThreadsPerCore 1: 96 CPUs)"
        assert int(requests["cpu"]) == allocatable.whole_node_cpu_request(group.instance, 1)
        validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": team.namespace},
                  "spec": {**pod, "restartPolicy": replica["restartPolicy"]}}, VERSION)


def test_the_benchmark_script_is_the_eks_jobs(job_objects):
    eks = {o["kind"]: o for o in yaml.safe_load_all((ROOT / "examples" / "jobs" / "nccl-allreduce.yaml").read_text())}
    assert job_objects["ConfigMap"]["data"] == eks["ConfigMap"]["data"]

"""Every Kubernetes object fmcluster applies to an EKS cluster is valid for the cluster's Kubernetes version (built-in
kinds) or its CRD (Kueue), read back from the synthesized templates; the Helm values' Kubernetes fragments are valid
inside the pods they end up in; and the scheduling and storage objects say what the spec says."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import jsonschema
import kubernetes_validate
import pytest
from helpers import resources_of
from helpers.storage import fsx_mounts
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import validate

from fmcluster.platforms.kubernetes import devices, gate, kueue, labels, volumes
from fmcluster.registry import load_spec

EXAMPLES = {"eks-p5": "eks-p5-cluster", "eks-p6-b200-capacity-block": "eks-b200-cluster"}


def _resolve(value: Any) -> str:
    """A manifest string with its CloudFormation references replaced by plausible values."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_resolve(p) for p in parts)
    text = json.dumps(value)
    if "FileSystem" in text and ("Ref" in text or "ImportValue" in text) and "Dns" not in text and "Mount" not in text:
        return "fs-0123456789abcdef0"
    if "Mount" in text:
        return "abcdef12"
    if "Dns" in text:
        return "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
    return "resolved"


def applied_objects(template: Dict[str, Any]) -> Dict[str, List[Dict[str, Any]]]:
    """Logical id -> the objects a Custom::AWSCDK-EKS-KubernetesResource applies."""
    return {lid: json.loads(_resolve(r["Properties"]["Manifest"]))
            for lid, r in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").items()}


def helm_values(template: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {r["Properties"]["Chart"]: json.loads(r["Properties"].get("Values", "{}"))
            for r in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()}


@pytest.fixture(scope="module", params=sorted(EXAMPLES))
def example(request, synth_example):
    spec = load_spec(f"examples/{request.param}.yaml")
    return spec, synth_example(request.param)[EXAMPLES[request.param]]


def test_every_applied_object_is_valid_for_the_cluster_version(example):
    spec, template = example
    version = spec.orchestrator.eks.kubernetes_version
    kinds = set()
    for lid, objects in applied_objects(template).items():
        for obj in objects:
            obj = {**obj, "metadata": {k: v for k, v in obj["metadata"].items()}}
            validate(obj, version)
            kinds.add(obj["kind"])
    assert {"Namespace", "PersistentVolume", "PersistentVolumeClaim", "DaemonSet", "ClusterRole", "ConfigMap",
            "ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology"} <= kinds


def test_helm_values_fragments_are_valid_in_a_pod(example):
    spec, template = example
    version = spec.orchestrator.eks.kubernetes_version
    values = helm_values(template)
    for chart, v in values.items():
        pod_spec: Dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
        for key in ("tolerations", "nodeSelector", "affinity", "priorityClassName"):
            if key in v:
                pod_spec[key] = v[key]
        validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": chart}, "spec": pod_spec}, version)
    if "kueue" in values:
        manager = values["kueue"]["controllerManager"]
        validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kueue"},
                  "spec": {"containers": [{"name": "c", "image": "i"}], "nodeSelector": manager["nodeSelector"]}},
                 version)


def test_the_validator_refuses_what_an_api_server_would():
    """The checks are real: fields of another API version, unknown fields and bad quantities are refused."""
    cq = {"apiVersion": kueue.API, "kind": "ClusterQueue", "metadata": {"name": "q"},
          "spec": {"cohort": "team", "resourceGroups": []}}  # v1beta1's cohort is v1beta2's cohortName
    with pytest.raises(jsonschema.ValidationError, match="cohort"):
        validate(cq, "1.35")
    ds = gate.daemonset(groups=["a"], policy="taint")
    ds["spec"]["template"]["spec"]["tolerations"][0]["effect"] = "NoSchedule"
    ds["spec"]["template"]["spec"]["nodeSelectr"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="nodeSelectr"):
        validate(ds, "1.35")
    (fsx,) = fsx_mounts(file_system_id="fs-1", dns_name="d", mount_name="m", capacity_gib=1200)
    assert fsx.kubernetes is not None
    pv = volumes.static_volume(cluster="c", namespace="n", volume=fsx.kubernetes)[0]
    pv["spec"]["capacity"]["storage"] = {"gi": 1200}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pv, "1.35")


def test_kueue_flavors_quotas_and_topology_follow_the_node_groups(synth_example):
    objects = applied_objects(synth_example("eks-p5")["eks-p5-cluster"])
    applied = next(v for k, v in objects.items() if k.startswith("EksObjectsKueueQueues"))
    queue = {o["kind"]: o for o in applied if o["metadata"]["name"] not in (kueue.SYSTEM_FLAVOR, kueue.HOST_TOPOLOGY)}
    assert queue["Topology"]["spec"]["levels"] == [
        {"nodeLabel": "topology.k8s.aws/network-node-layer-1"}, {"nodeLabel": "topology.k8s.aws/network-node-layer-2"},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-3"}, {"nodeLabel": "kubernetes.io/hostname"}]
    flavor = queue["ResourceFlavor"]["spec"]
    assert flavor["nodeLabels"] == {labels.GROUP: "h100"} and flavor["topologyName"] == "aws-3-layers"
    assert flavor["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    (group,) = queue["ClusterQueue"]["spec"]["resourceGroups"]
    quota = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    # the elastic group's ceiling (max_count 8): a job beyond count must be admitted for its pods to wait for nodes
    assert quota == {"cpu": 1536, "memory": "16777216Mi", "nvidia.com/gpu": 64, "vpc.amazonaws.com/efa": 256}
    # last, the system nodes' flavor (2 x m6i.2xlarge): for launchers that tolerate its taint, placed per host
    system = next(o for o in applied if o["kind"] == "ResourceFlavor" and o["metadata"]["name"] == kueue.SYSTEM_FLAVOR)
    assert system["spec"] == {"nodeLabels": {labels.GROUP: "system"}, "nodeTaints": [kueue.SYSTEM_FLAVOR_TAINT],
                              "topologyName": kueue.HOST_TOPOLOGY}
    assert group["flavors"][-1] == {"name": "system", "resources": [
        {"name": "cpu", "nominalQuota": 16}, {"name": "memory", "nominalQuota": "65536Mi"},
        {"name": "nvidia.com/gpu", "nominalQuota": 0}, {"name": "vpc.amazonaws.com/efa", "nominalQuota": 0}]}
    assert queue["LocalQueue"]["metadata"]["namespace"] == "training"
    assert queue["LocalQueue"]["spec"] == {"clusterQueue": "training"}


def test_four_layer_topology_and_dra_quotas_on_p6(synth_example):
    objects = applied_objects(synth_example("eks-p6-b200-capacity-block")["eks-b200-cluster"])
    applied = next(v for k, v in objects.items() if k.startswith("EksObjectsKueueQueues"))
    queue = {o["kind"]: o for o in applied if o["metadata"]["name"] not in (kueue.SYSTEM_FLAVOR, kueue.HOST_TOPOLOGY)}
    assert [level["nodeLabel"] for level in queue["Topology"]["spec"]["levels"]][-2:] == [
        "topology.k8s.aws/network-node-layer-4", "kubernetes.io/hostname"]
    (group,) = queue["ClusterQueue"]["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"], \
        "DRA: EFA claims are charged to the resource their DeviceClass is mapped to"
    quota = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert quota["vpc.amazonaws.com/efa"] == 2 * 8, "2 nodes x 8 EFA devices"


def test_every_claimed_device_class_is_mapped_for_kueue_and_no_claim_takes_all(synth_example):
    """What Kueue checks before admitting a workload with a ResourceClaimTemplate (kueue_rules: v0.19.2 source)."""
    import yaml

    template = synth_example("eks-p6-b200-capacity-block")["eks-b200-cluster"]
    config = yaml.safe_load(helm_values(template)["kueue"]["managerConfig"]["controllerManagerConfigYaml"])
    assert kueue_rules.validate_device_class_mappings(config) == []
    assert config["resources"]["deviceClassMappings"] == [
        {"name": "vpc.amazonaws.com/efa", "deviceClassNames": ["efa.networking.k8s.aws"]}]
    claims = next(v for k, v in applied_objects(template).items() if k.startswith("EksObjectsEfaClaimTemplate"))
    queue = next(v for k, v in applied_objects(template).items() if k.startswith("EksObjectsKueueQueues"))
    (cq,) = [o for o in queue if o["kind"] == "ClusterQueue"]
    for claim in claims:
        charged = kueue_rules.claim_requests(claim, config)
        assert set(charged) <= set(cq["spec"]["resourceGroups"][0]["coveredResources"])
    p5 = helm_values(synth_example("eks-p5")["eks-p5-cluster"])["kueue"]
    assert "deviceClassMappings" not in yaml.safe_load(p5["managerConfig"]["controllerManagerConfigYaml"])["resources"]


def test_the_kueue_rules_refuse_what_kueue_refuses():
    """The transcription catches the mistakes Kueue v0.19.2 turns into an inadmissible workload."""
    config = {"resources": {"deviceClassMappings": [{"name": "vpc.amazonaws.com/efa",
                                                     "deviceClassNames": ["efa.networking.k8s.aws"]}]}}
    claim = {"metadata": {"name": "efa"}, "spec": {"spec": {"devices": {"requests": [
        {"name": "efa", "exactly": {"deviceClassName": "efa.networking.k8s.aws", "allocationMode": "All"}}]}}}}
    with pytest.raises(kueue_rules.Inadmissible, match="AllocationMode 'All' is not supported"):
        kueue_rules.claim_requests(claim, config)
    claim["spec"]["spec"]["devices"]["requests"][0]["exactly"].update(allocationMode="ExactCount", count=8)
    assert kueue_rules.claim_requests(claim, config) == {"vpc.amazonaws.com/efa": 8}
    with pytest.raises(kueue_rules.Inadmissible, match="is not mapped in DRA configuration"):
        kueue_rules.claim_requests(claim, {"resources": {}})
    cq = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}}
    assert kueue_rules.admission_problems({"vpc.amazonaws.com/efa": 8}, cq) == [
        "resource vpc.amazonaws.com/efa unavailable in ClusterQueue"]
    assert kueue_rules.admission_problems({"cpu": 8}, cq) == ["flavor f: insufficient quota (cpu: 8 > 4)"]
    bad = {"resources": {"deviceClassMappings": [{"name": "efa", "deviceClassNames": []},
                                                 {"name": "efa", "deviceClassNames": ["Not_A/dns label"]}]}}
    assert len(kueue_rules.validate_device_class_mappings(bad)) == 3


def test_all_or_nothing_admission_is_configured(synth_example):
    values = helm_values(synth_example("eks-p6-b200-capacity-block")["eks-b200-cluster"])["kueue"]
    import yaml

    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["waitForPodsReady"]["timeout"] == "900s" and config["waitForPodsReady"]["blockAdmission"] is True
    assert "enable" not in config["waitForPodsReady"], "v1beta2 has no enable field: presence enables it"
    assert config["manageJobsWithoutQueueName"] is False and "batch/job" in config["integrations"]["frameworks"]
    assert values["controllerManager"]["nodeSelector"] == {labels.GROUP: "system"}


def test_the_file_system_is_a_static_read_write_many_volume(synth_example):
    objects = applied_objects(synth_example("eks-p5")["eks-p5-cluster"])
    pv, pvc = next(v for k, v in objects.items() if k.startswith("EksObjectsSharedFileSystem"))
    assert pv["spec"]["csi"]["driver"] == "fsx.csi.aws.com"
    assert pv["spec"]["csi"]["volumeHandle"] == "fs-0123456789abcdef0"
    assert set(pv["spec"]["csi"]["volumeAttributes"]) == {"dnsname", "mountname"}
    assert pv["spec"]["accessModes"] == pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and pv["spec"]["capacity"]["storage"] == "4800Gi"
    assert pvc["metadata"] == {"name": "fsx", "namespace": "training", "labels": pvc["metadata"]["labels"]}
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"] and pvc["spec"]["storageClassName"] == ""
    cfn = next(r for k, r in synth_example("eks-p5")["eks-p5-cluster"]["Resources"].items()
               if k.startswith("EksObjectsSharedFileSystem"))
    assert "Fn::ImportValue" in json.dumps(cfn["Properties"]["Manifest"]), "the real file system's id and names"


def test_dra_jobs_claim_every_efa_device_of_a_node(synth_example):
    objects = applied_objects(synth_example("eks-p6-b200-capacity-block")["eks-b200-cluster"])
    (claim,) = next(v for k, v in objects.items() if k.startswith("EksObjectsEfaClaimTemplate"))
    (request,) = claim["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {"deviceClassName": "efa.networking.k8s.aws", "allocationMode": "ExactCount",
                                  "count": 8}, "Kueue refuses allocationMode All; p6-b200 has 8 EFA devices"
    assert (claim["metadata"]["name"], claim["metadata"]["namespace"]) == ("efa-b200", "training")
    assert not any(k.startswith("EksObjectsEfaClaimTemplate") for k in applied_objects(
        synth_example("eks-p5")["eks-p5-cluster"])), "the device plugin needs no claim"


def test_device_plugins_never_share_a_node(synth_example):
    p5 = helm_values(synth_example("eks-p5")["eks-p5-cluster"])
    b200 = helm_values(synth_example("eks-p6-b200-capacity-block")["eks-b200-cluster"])
    assert "aws-efa-k8s-device-plugin" in p5 and "aws-dranet" not in p5
    assert "aws-dranet" in b200 and "aws-efa-k8s-device-plugin" not in b200
    assert p5["aws-efa-k8s-device-plugin"]["nodeSelector"] == {labels.EFA_DEVICE: "plugin"}
    assert b200["aws-dranet"]["nodeSelector"] == {labels.EFA_DEVICE: "dra"}
    nvidia = p5["nvidia-device-plugin"]
    assert nvidia["mofedEnabled"] is False
    for values in (nvidia, p5["aws-efa-k8s-device-plugin"], b200["aws-dranet"]):
        keys = {t.get("key") for t in values["tolerations"]}
        assert {"nvidia.com/gpu", labels.VALIDATION_TAINT_KEY} <= keys


def test_helm_gives_up_before_the_kubectl_handler_lambda_is_killed(example):
    """A waited-on chart's Helm timeout is shorter than the kubectl provider Lambda's 15 minutes, so Helm reports a
    slow install itself."""
    from fmcluster.platforms.kubernetes.charts import HELM_TIMEOUT, KUBECTL_HANDLER_TIMEOUT

    _, template = example
    waited = [r["Properties"] for r in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()
              if r["Properties"].get("Wait")]
    assert waited, "the scheduler chart is waited on"
    for chart in waited:
        assert chart["Timeout"] == f"{HELM_TIMEOUT.to_seconds():.0f}s" == "720s"
    (handler,) = [r["Properties"] for lid, r in resources_of(template, "AWS::Lambda::Function").items()
                  if "KubectlProviderHandler" in lid]
    assert handler["Timeout"] == KUBECTL_HANDLER_TIMEOUT.to_seconds() == 900
    assert HELM_TIMEOUT.to_seconds() < handler["Timeout"]


def test_charts_are_pinned(example):
    _, template = example
    from fmcluster.platforms.kubernetes.versions import CHARTS

    for chart in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values():
        p = chart["Properties"]
        pin = CHARTS[p["Chart"]]
        assert (p["Repository"], p["Version"]) == (pin.repository, pin.version)


def test_renderers_are_plain_functions_of_the_spec():
    spec = load_spec("examples/eks-p5.yaml")
    objects = kueue.queue_objects(spec.node_groups, spec.orchestrator.eks)
    assert objects == kueue.queue_objects(spec.node_groups, spec.orchestrator.eks)
    assert devices.efa_device_plugin()["nodeSelector"] == {labels.EFA_DEVICE: "plugin"}

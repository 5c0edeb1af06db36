"""Serving on the Kubernetes kinds, read back from the two serving examples' synthesized templates (each synthesized
once, through the shared fixture) and rendered in-process for the other mode: every applied object is valid for its
schema (Kubernetes, Dynamo's DynamoGraphDeployment, the HyperPod Inference Operator's InferenceEndpointConfig, KEDA's);
disaggregated workers carry the EFA settings AWS's and NVIDIA's guide lists; weights come from FSx or S3, never the
internet; scalers follow the engines' load within the spec's replicas; the operators are installed at their pins with
least-privilege roles."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List

import pytest
from helpers import resources_of
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.eks import serving as eks_serving
from fmcluster.orchestrators.hyperpod_eks import serving as hp_serving
from fmcluster.platforms.kubernetes import allocatable, load_test
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.platforms.kubernetes.versions import CHARTS
from fmcluster.registry import load_spec, parse_spec

EKS, HP = "eks-p5en-serving", "hyperpod-eks-p5en-serving"
STACKS = {EKS: "eks-serve-cluster", HP: "hpeks-serve-cluster"}


def _resolve(value: Any) -> str:
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_resolve(p) for p in parts)
    text = json.dumps(value)
    if "Workspace" in text:
        return "ws-0123abcd-4567"  # the AMP workspace's id, as the operator's schema takes it
    if "Region" in text:
        return "us-east-1"
    return "resolved"


def _objects(template: Dict[str, Any]) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for r in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").values():
        text = json.dumps(r["Properties"]["Manifest"])
        # CloudFormation references inside strings become plausible values before the schema sees them
        out += json.loads(_resolve(r["Properties"]["Manifest"])) if '"Fn::' in text else json.loads(
            r["Properties"]["Manifest"])
    return out


@pytest.fixture(scope="module")
def templates(synth_example):
    found = synth_example.all([EKS, HP])
    return {name: found[name][STACKS[name]] for name in (EKS, HP)}


@pytest.mark.parametrize("name", [EKS, HP])
def test_every_applied_object_is_valid_for_its_schema(templates, name):
    spec = load_spec(f"examples/{name}.yaml")
    kinds = set()
    for obj in _objects(templates[name]):
        validate(obj, spec.orchestrator.eks.kubernetes_version)
        kinds.add(obj["kind"])
    expected = ({"DynamoGraphDeployment", "ScaledObject", "TriggerAuthentication", "PersistentVolume"} if name == EKS
                else {"InferenceEndpointConfig"})
    assert expected | {"Namespace", "ServiceAccount"} <= kinds


def _disaggregated_eks_spec() -> Any:
    import yaml

    data = yaml.safe_load(open(f"examples/{EKS}.yaml"))
    m = data["serving"]["models"][0]
    for key in ("parallelism", "replicas"):
        m.pop(key)
    m.update(mode="disaggregated", engine="sglang", prefill={"replicas": {"min": 1, "max": 2}},
             decode={"replicas": {"min": 1, "max": 1}})
    return parse_spec(data)


def _efa_checked(container_env: Dict[str, str], resources: Dict[str, Any]) -> None:
    # the guide's list, every variable with its value (test_the_efa_list_is_the_one_docs_serving_md_cites holds the
    # list itself to the docs and its source)
    assert {k: container_env.get(k) for k in common.EFA_ENV} == common.EFA_ENV
    gpus, efa = int(resources["limits"]["nvidia.com/gpu"]), int(resources["limits"]["vpc.amazonaws.com/efa"])
    assert efa >= 1 and resources["requests"] == resources["limits"]
    # as many of these pods as the node's GPUs hold fit its EFA driver's hugepages (5128 pages of 2 MiB), each at
    # most the guide's 5120Mi
    hugepages = int(resources["limits"]["hugepages-2Mi"][:-2])
    assert hugepages <= 5120 and (8 // gpus) * hugepages <= allocatable.EFA_HUGEPAGES_2MI // 2**20


def test_the_efa_list_is_the_one_docs_serving_md_cites():
    """docs/serving.md's "Disaggregated serving over EFA" names every variable with its value and the guide it comes
    from; the manifests' list is that one."""
    import re

    text = open("docs/serving.md").read()
    section = text[text.index("### Disaggregated serving over EFA"):]
    section = section[:section.index("\n### ")]
    documented = dict(re.findall(r"`(FI_[A-Z_]+)=([^`]+)`", section))
    assert documented == common.EFA_ENV
    assert common.EFA_SOURCE in section and "`SGLANG_DISAGGREGATION_NIXL_BACKEND=LIBFABRIC`" in section
    assert json.dumps(common.VLLM_KV_TRANSFER, separators=(",", ":")) in section


def test_hugepages_share_the_node_pool_between_the_workers_it_holds():
    assert [common.hugepages_share(tp, 8) for tp in (1, 2, 4, 8)] == ["1282Mi", "2564Mi", "5120Mi", "5120Mi"]


def test_disaggregated_workers_carry_the_efa_settings_the_guides_list():
    spec = _disaggregated_eks_spec()
    d = spec.serving.models[0]
    graph = eks_serving.graph(spec, d, "serving")
    validate(graph, "1.34")
    roles = {c["type"]: c for c in graph["spec"]["components"]}
    assert set(roles) == {"frontend", "prefill", "decode"}
    for role in ("prefill", "decode"):
        pod = roles[role]["podTemplate"]["spec"]
        main = pod["containers"][0]
        env = {e["name"]: e["value"] for e in main["env"]}
        _efa_checked(env, main["resources"])
        assert env["SGLANG_DISAGGREGATION_NIXL_BACKEND"] == "LIBFABRIC"
        assert main["securityContext"]["privileged"] and "IPC_LOCK" in main["securityContext"]["capabilities"]["add"]
        assert pod["hostIPC"] and main["image"].endswith("efa-sglang-runtime-v1")
        args = main["args"]
        assert args[args.index("--disaggregation-mode") + 1] == role
        assert args[args.index("--disaggregation-transfer-backend") + 1] == "nixl"
    # the HyperPod example: EFA devices, hugepages and the EFA settings per role; the operator wires the connector
    # (LMCache and NIXL), so the roles' arguments leave it to it
    hp = load_spec(f"examples/{HP}.yaml")
    iec = hp_serving.endpoint_config(hp, hp.serving.models[0], "serving", workspace_url="https://aps/ws")
    env = {e["name"]: e["value"] for e in iec["spec"]["worker"]["environmentVariables"]}
    for key in ("prefillSpec", "decodingSpec"):
        role = iec["spec"]["pdSpec"][key]
        _efa_checked(env, role["resources"])
        assert "--kv-transfer-config" not in role["args"]
    assert common.EFA_SOURCE in (open("docs/serving.md").read())


def test_weights_come_from_fsx_or_s3_never_the_internet(templates):
    graphs = [o for o in _objects(templates[EKS]) if o["kind"] == "DynamoGraphDeployment"]
    worker = next(c for c in graphs[0]["spec"]["components"] if c["type"] == "worker")
    main = worker["podTemplate"]["spec"]["containers"][0]
    assert main["args"][main["args"].index("--model") + 1] == "/fsx/models/llama-3.3-70b-instruct-fp8"
    assert {"name": "fsx", "mountPath": "/fsx", "readOnly": True} in main["volumeMounts"]
    iec = next(o for o in _objects(templates[HP]) if o["kind"] == "InferenceEndpointConfig")
    source = iec["spec"]["modelSourceConfig"]
    assert source == {"modelSourceType": "s3", "s3Storage": {"bucketName": "my-models-bucket", "region": "us-east-1"},
                      "modelLocation": "llama-3.3-70b-instruct-fp8"}
    for pod_args in (main["args"], iec["spec"]["worker"]["args"]):
        assert not any("huggingface.co" in a or a.startswith("hf://") for a in pod_args)
    # a model streamed from S3 on eks: Run:ai Model Streamer, spread over the tensor-parallel ranks
    import yaml

    data = yaml.safe_load(open(f"examples/{EKS}.yaml"))
    data["serving"]["models"][0]["source"] = {"s3": "s3://models/llama/"}
    spec = parse_spec(data)
    main = next(c for c in eks_serving.graph(spec, spec.serving.models[0], "serving")["spec"]["components"]
                if c["type"] == "worker")["podTemplate"]["spec"]["containers"][0]
    assert main["args"][main["args"].index("--load-format") + 1] == "runai_streamer"


def test_scalers_follow_the_engines_load_within_the_replicas(templates):
    spec = load_spec(f"examples/{EKS}.yaml")
    d = spec.serving.models[0]
    (so,) = [o for o in _objects(templates[EKS]) if o["kind"] == "ScaledObject"]
    assert so["spec"]["scaleTargetRef"] == {"apiVersion": "nvidia.com/v1alpha1",
                                            "kind": "DynamoGraphDeploymentScalingAdapter", "name": "llama-70b-worker"}
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (d.replicas.min, d.replicas.max)
    queries = [t["metadata"]["query"] for t in so["spec"]["triggers"]]
    assert all(t["type"] == "prometheus" and t["metadata"]["identityOwner"] == "operator"
               for t in so["spec"]["triggers"])
    assert "vllm:num_requests_waiting" in queries[0] and "vllm:kv_cache_usage_perc" in queries[1]
    assert all('pool="llama-70b-worker"' in q for q in queries) and not any("cpu" in q for q in queries)
    hp = next(o for o in _objects(templates[HP]) if o["kind"] == "InferenceEndpointConfig")
    scaling = hp["spec"]["pdSpec"]["autoScalingSpec"]
    hp_spec = load_spec(f"examples/{HP}.yaml").serving.models[0]
    assert (scaling["prefillAutoScaling"]["minReplicaCount"], scaling["prefillAutoScaling"]["maxReplicaCount"]) == (
        hp_spec.prefill.replicas.min, hp_spec.prefill.replicas.max)
    assert "vllm:num_requests_waiting" in scaling["decodingAutoScaling"]["prometheusTrigger"]["query"]


def test_operators_are_installed_at_their_pins_with_least_privilege(templates):
    charts = {r["Properties"]["Chart"]: r["Properties"] for r in
              resources_of(templates[EKS], "Custom::AWSCDK-EKS-HelmChart").values()}
    for name in ("dynamo-platform", "keda"):
        assert charts[name]["Version"] == CHARTS[name].version and charts[name]["Repository"] == CHARTS[name].repository
    policies = [r["Properties"]["PolicyDocument"]["Statement"] for r in
                resources_of(templates[EKS], "AWS::IAM::Policy").values()]
    keda = [s for statements in policies for s in statements if s.get("Sid") == "QueryServingMetrics"]
    assert keda and all(set(s["Action"]) <= {"aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels",
                                             "aps:GetMetricMetadata"} for s in keda)
    addons = {r["Properties"]["AddonName"]: r["Properties"] for r in
              resources_of(templates[HP], "AWS::EKS::Addon").values()}
    inference = addons[hp_serving.ADDON]
    assert inference["AddonVersion"] == "v1.0.0-eksbuild.1"
    config = json.loads(inference["ConfigurationValues"]) if isinstance(inference["ConfigurationValues"], str) else \
        inference["ConfigurationValues"]
    assert "alb" in json.dumps(config)
    assert {"aws-mountpoint-s3-csi-driver", "metrics-server", "cert-manager"} <= set(addons)
    reads = [s for r in resources_of(templates[HP], "AWS::IAM::Policy").values()
             for s in r["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid", "").startswith("ReadModel")]
    assert reads and all(s["Action"] == "s3:GetObject" and "llama-3.3-70b-instruct-fp8/*" in json.dumps(s["Resource"])
                         for s in reads)


@pytest.mark.parametrize("name", [EKS, HP])
def test_the_load_test_job_is_valid_and_targets_the_endpoint(name):
    from fmcluster.registry import kind_of

    spec = load_spec(f"examples/{name}.yaml")
    d = spec.serving.models[0]
    endpoint = kind_of(spec).serving_endpoint(spec, d)
    job = load_test.job(d, spec.serving.namespace, endpoint)
    validate(copy.deepcopy(job), spec.orchestrator.eks.kubernetes_version)
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert endpoint.url in script and f"--request-rate {d.workload.requests_per_second:g}" in script
    assert "--save-result" in script and load_test.JSON_MARKER in script and load_test.MARKER in script


def _scrape_jobs(template: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    from fmcluster.platforms.kubernetes.scraper import ManagedScraper

    (scraper,) = resources_of(template, "AWS::APS::Scraper").values()
    config = ManagedScraper.decode(scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"])
    return {job["job_name"]: job for job in config["scrape_configs"]}


def test_engine_metrics_reach_the_workspace_with_the_labels_scalers_and_alerts_select(templates):
    from fmcluster.platforms.kubernetes import metrics

    for name in (EKS, HP):
        jobs = _scrape_jobs(templates[name])
        for job in ("serving", "serving-engines"):
            assert jobs[job]["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["serving"]}}]
            relabel = jobs[job]["relabel_configs"]
            assert {"target_label": "cluster", "replacement": STACKS[name].rsplit("-", 1)[0]} in relabel
            assert {"source_labels": ["__meta_kubernetes_pod_label_fmcluster_io_pool"], "regex": "(.+)",
                    "target_label": "pool"} in relabel
    # eks: each worker pod names its metrics port, where DYN_SYSTEM_PORT puts the engine's metrics; the pool label the
    # scrape copies is the one the scalers select on
    graph = next(o for o in _objects(templates[EKS]) if o["kind"] == "DynamoGraphDeployment")
    (so,) = [o for o in _objects(templates[EKS]) if o["kind"] == "ScaledObject"]
    for c in graph["spec"]["components"]:
        pod_labels = c["podTemplate"]["metadata"]["labels"]
        if c["type"] == "frontend":
            assert pod_labels[metrics.METRICS_PORT_LABEL] == str(common.PORT)
            continue
        env = {e["name"]: e["value"] for e in c["podTemplate"]["spec"]["containers"][0]["env"]}
        assert pod_labels[metrics.METRICS_PORT_LABEL] == env["DYN_SYSTEM_PORT"] == str(eks_serving.SYSTEM_PORT)
        assert all(f'pool="{pod_labels["fmcluster.io/pool"]}"' in t["metadata"]["query"]
                   for t in so["spec"]["triggers"])
    # hyperpod-eks: the operator's pods are scraped on the engine's port, which the resource serves metrics on
    iec = next(o for o in _objects(templates[HP]) if o["kind"] == "InferenceEndpointConfig")
    assert iec["spec"]["worker"]["modelInvocationPort"]["containerPort"] == metrics.ENGINE_PORT
    assert iec["spec"]["metrics"]["modelMetrics"]["port"] == metrics.ENGINE_PORT


def test_each_disaggregated_pool_scales_on_its_own_load_within_its_replicas():
    spec = _disaggregated_eks_spec()
    d = spec.serving.models[0]
    scalers = {so["metadata"]["name"]: so for so in eks_serving.scalers(spec, d, "serving", workspace_url="https://w")}
    assert set(scalers) == {"llama-70b-prefill", "llama-70b-decode"}
    for role, pool in (("prefill", d.prefill), ("decode", d.decode)):
        so = scalers[f"llama-70b-{role}"]
        validate(copy.deepcopy(so), "1.34")
        assert so["spec"]["scaleTargetRef"]["name"] == f"llama-70b-{role}"
        assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (pool.replicas.min, pool.replicas.max)
        load, kv = (t["metadata"] for t in so["spec"]["triggers"])
        # SGLang's own queue and KV-cache gauges, this pool's only; the load target is the plan's concurrency
        assert "sglang:num_queue_reqs" in load["query"] and f'pool="llama-70b-{role}"' in load["query"]
        assert "sglang:token_usage" in kv["query"] and kv["threshold"] == "0.85"
        assert float(load["threshold"]) >= 1
    # scale-down is slow and one pod at a time: a replica that loaded its weights is not dropped on a dip
    behavior = scalers["llama-70b-decode"]["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"] == {"stabilizationWindowSeconds": 600,
                                     "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}]}

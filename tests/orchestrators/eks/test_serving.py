"""Serving on eks, read back from the eks serving example's synthesized template (synthesized once, through the shared
fixture) and rendered in-process for the disaggregated mode: NVIDIA Dynamo's DynamoGraphDeployment and KEDA's objects
valid for their schemas; disaggregated workers with the EFA settings of the guide; weights from FSx or S3; scalers
on the engines' load within the pools' replicas; Dynamo and KEDA at their pins with least-privilege roles; the engines'
metrics scraped with the labels scalers and alerts select on."""

from __future__ import annotations

import copy
from typing import Any, Dict

import pytest
import yaml
from helpers import resources_of
from helpers.serving import applied_objects, assert_efa_worker, assert_serving_scraped
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.eks import serving as eks_serving
from fmcluster.platforms.kubernetes import metrics
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.platforms.kubernetes.versions import CHARTS
from fmcluster.registry import load_spec, parse_spec

EXAMPLE, STACK = "eks-p5en-serving", "eks-serve-cluster"


@pytest.fixture(scope="module")
def template(synth_example) -> Dict[str, Any]:
    return synth_example(EXAMPLE)[STACK]


def disaggregated_spec() -> Any:
    data = yaml.safe_load(open(f"examples/{EXAMPLE}.yaml"))
    m = data["serving"]["models"][0]
    for key in ("parallelism", "replicas"):
        m.pop(key)
    m.update(mode="disaggregated", engine="sglang", prefill={"replicas": {"min": 1, "max": 2}},
             decode={"replicas": {"min": 1, "max": 1}})
    return parse_spec(data)


def test_every_applied_object_is_valid_for_its_schema(template):
    spec = load_spec(f"examples/{EXAMPLE}.yaml")
    kinds = set()
    for obj in applied_objects(template):
        validate(obj, spec.orchestrator.eks.kubernetes_version)
        kinds.add(obj["kind"])
    assert {"DynamoGraphDeployment", "ScaledObject", "TriggerAuthentication", "PersistentVolume", "Namespace",
            "ServiceAccount"} <= kinds


def test_disaggregated_workers_carry_the_efa_settings_the_guide_lists():
    spec = disaggregated_spec()
    graph = eks_serving.graph(spec, spec.serving.models[0], "serving")
    validate(graph, "1.34")
    roles = {c["type"]: c for c in graph["spec"]["components"]}
    assert set(roles) == {"frontend", "prefill", "decode"}
    for role in ("prefill", "decode"):
        pod = roles[role]["podTemplate"]["spec"]
        main = pod["containers"][0]
        env = {e["name"]: e["value"] for e in main["env"]}
        assert_efa_worker(env, main["resources"])
        assert env["SGLANG_DISAGGREGATION_NIXL_BACKEND"] == "LIBFABRIC"
        assert main["securityContext"]["privileged"] and "IPC_LOCK" in main["securityContext"]["capabilities"]["add"]
        assert pod["hostIPC"] and main["image"].endswith("efa-sglang-runtime-v1")
        args = main["args"]
        assert args[args.index("--disaggregation-mode") + 1] == role
        assert args[args.index("--disaggregation-transfer-backend") + 1] == "nixl"


def test_weights_come_from_fsx_or_s3_never_the_internet(template):
    graph = next(o for o in applied_objects(template) if o["kind"] == "DynamoGraphDeployment")
    worker = next(c for c in graph["spec"]["components"] if c["type"] == "worker")
    main = worker["podTemplate"]["spec"]["containers"][0]
    assert main["args"][main["args"].index("--model") + 1] == "/fsx/models/llama-3.3-70b-instruct-fp8"
    assert {"name": "fsx", "mountPath": "/fsx", "readOnly": True} in main["volumeMounts"]
    assert not any("huggingface.co" in a or a.startswith("hf://") for a in main["args"])
    # a model streamed from S3: Run:ai Model Streamer, spread over the tensor-parallel ranks
    data = yaml.safe_load(open(f"examples/{EXAMPLE}.yaml"))
    data["serving"]["models"][0]["source"] = {"s3": "s3://models/llama/"}
    spec = parse_spec(data)
    main = next(c for c in eks_serving.graph(spec, spec.serving.models[0], "serving")["spec"]["components"]
                if c["type"] == "worker")["podTemplate"]["spec"]["containers"][0]
    assert main["args"][main["args"].index("--load-format") + 1] == "runai_streamer"


def test_scalers_follow_the_engines_load_within_the_replicas(template):
    d = load_spec(f"examples/{EXAMPLE}.yaml").serving.models[0]
    (so,) = [o for o in applied_objects(template) if o["kind"] == "ScaledObject"]
    assert so["spec"]["scaleTargetRef"] == {"apiVersion": "nvidia.com/v1alpha1",
                                            "kind": "DynamoGraphDeploymentScalingAdapter", "name": "llama-70b-worker"}
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (d.replicas.min, d.replicas.max)
    queries = [t["metadata"]["query"] for t in so["spec"]["triggers"]]
    assert all(t["type"] == "prometheus" and t["metadata"]["identityOwner"] == "operator"
               for t in so["spec"]["triggers"])
    assert "vllm:num_requests_waiting" in queries[0] and "vllm:kv_cache_usage_perc" in queries[1]
    assert all('pool="llama-70b-worker"' in q for q in queries) and not any("cpu" in q for q in queries)


def test_each_disaggregated_pool_scales_on_its_own_load_within_its_replicas():
    spec = disaggregated_spec()
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


def test_dynamo_and_keda_are_installed_at_their_pins_with_least_privilege(template):
    charts = {r["Properties"]["Chart"]: r["Properties"] for r in
              resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()}
    for name in ("dynamo-platform", "keda"):
        assert charts[name]["Version"] == CHARTS[name].version and charts[name]["Repository"] == CHARTS[name].repository
    statements = [s for r in resources_of(template, "AWS::IAM::Policy").values()
                  for s in r["Properties"]["PolicyDocument"]["Statement"]]
    keda = [s for s in statements if s.get("Sid") == "QueryServingMetrics"]
    assert keda and all(set(s["Action"]) <= {"aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels",
                                             "aps:GetMetricMetadata"} for s in keda)


def test_engine_metrics_reach_the_workspace_with_the_labels_scalers_and_alerts_select(template):
    assert_serving_scraped(template, "eks-serve")
    # each worker pod names its metrics port, where DYN_SYSTEM_PORT puts the engine's metrics; the pool label the
    # scrape copies is the one the scalers select on
    objects = applied_objects(template)
    graph = next(o for o in objects if o["kind"] == "DynamoGraphDeployment")
    (so,) = [o for o in objects if o["kind"] == "ScaledObject"]
    for c in graph["spec"]["components"]:
        pod_labels = c["podTemplate"]["metadata"]["labels"]
        if c["type"] == "frontend":
            assert pod_labels[metrics.METRICS_PORT_LABEL] == str(common.PORT)
            continue
        env = {e["name"]: e["value"] for e in c["podTemplate"]["spec"]["containers"][0]["env"]}
        assert pod_labels[metrics.METRICS_PORT_LABEL] == env["DYN_SYSTEM_PORT"] == str(eks_serving.SYSTEM_PORT)
        assert all(f'pool="{pod_labels["fmcluster.io/pool"]}"' in t["metadata"]["query"]
                   for t in so["spec"]["triggers"])

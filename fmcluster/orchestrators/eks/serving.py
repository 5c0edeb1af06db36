"""The eks kind's serving: NVIDIA Dynamo (its operator, from the dynamo-platform Helm chart) runs each `serving`
deployment as a DynamoGraphDeployment (a frontend and vLLM or SGLang workers, or prefill and decode workers moving the
KV cache over EFA with NIXL), in AWS's Dynamo runtime images; KEDA scales each worker pool through the Dynamo scaling
adapter on the engines' load in the AMP workspace (docs/serving.md, "eks: NVIDIA Dynamo")."""

from __future__ import annotations

import copy
from typing import Any, Dict, List

from fmcluster.platforms.kubernetes import labels
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.platforms.kubernetes.load_test import ServingEndpoint
from fmcluster.platforms.kubernetes.metrics import METRICS_PORT_LABEL
from fmcluster.spec import serving as serving_rules
from fmcluster.spec.serving import Deployment

API = "nvidia.com/v1beta1"
ADAPTER_API = "nvidia.com/v1alpha1"
DYNAMO_NAMESPACE = "dynamo-system"
KEDA_NAMESPACE, KEDA_SERVICE_ACCOUNT = "keda", "keda-operator"
AUTH = "amp"  # the serving namespace's TriggerAuthentication
# AWS's Dynamo runtime images (Deep Learning Containers, Dynamo 1.6.2, x86_64), with and without EFA: the EFA images
# carry the EFA installer's libfabric and NIXL's LIBFABRIC plugin for disaggregated workers
# (https://aws.github.io/deep-learning-containers/dynamo/, image table). The tags start with the Dynamo version, which
# the operator reads as the runtime's version.
DYNAMO_VERSION = "1.6.2"
IMAGES: Dict[tuple, str] = {
    ("vllm", False): "public.ecr.aws/deep-learning-containers/dynamo:1.6.2-vllm-runtime-v1",
    ("vllm", True): "public.ecr.aws/deep-learning-containers/dynamo:1.6.2-efa-vllm-runtime-v1",
    ("sglang", False): "public.ecr.aws/deep-learning-containers/dynamo:1.6.2-sglang-runtime-v1",
    ("sglang", True): "public.ecr.aws/deep-learning-containers/dynamo:1.6.2-efa-sglang-runtime-v1",
}
MODULES = {"vllm": "dynamo.vllm", "sglang": "dynamo.sglang"}
# A Dynamo worker serves no HTTP itself: its engine's metrics (vllm:*, sglang:*, passed through with Dynamo's own) are
# on its system port, off unless DYN_SYSTEM_PORT is set (ai-dynamo/dynamo docs/backends/vllm/prometheus.md); the
# frontend serves them on its HTTP port. The scraper reads the port from the pod's label.
SYSTEM_PORT = 9090
# What KEDA scales a worker pool on, per engine: the requests a pool holds (running and waiting, over the plan's
# concurrency per replica), and the share of its KV cache in use (over 85% per replica); vLLM's and SGLang's own
# metrics (docs/design/metrics.md in vllm-project/vllm; python/sglang/srt/metrics/collector.py in sgl-project/sglang).
LOAD_QUERIES = {
    "vllm": ('sum(vllm:num_requests_running{pool="%s"}) + sum(vllm:num_requests_waiting{pool="%s"})',
             'sum(vllm:kv_cache_usage_perc{pool="%s"})'),
    "sglang": ('sum(sglang:num_running_reqs{pool="%s"}) + sum(sglang:num_queue_reqs{pool="%s"})',
               'sum(sglang:token_usage{pool="%s"})'),
}
KV_TARGET = 0.85


def image(d: Deployment) -> str:
    return IMAGES[(d.engine, d.mode == "disaggregated")]


def _component_name(role: str) -> str:
    return {"": "worker", "prefill": "prefill", "decode": "decode"}[role]


def adapter_name(d: Deployment, role: str) -> str:
    """The DynamoGraphDeploymentScalingAdapter the operator creates for a component: the DGD's name and the
    component's, lower case (Dynamo, "Autoscaling")."""
    return f"{d.name}-{_component_name(role)}"


def _worker(spec: Any, d: Deployment, layout: serving_rules.Layout, role: str, replicas: Any,
            group: Any) -> Dict[str, Any]:
    disaggregated = bool(role)
    args = common.engine_args(spec, d, layout, role)
    if disaggregated and d.engine == "vllm":
        args += ["--disaggregation-mode", role]  # Dynamo's vLLM worker takes its role so
    env = [{"name": "DYN_SYSTEM_PORT", "value": str(SYSTEM_PORT)}]
    env += [{"name": k, "value": v} for k, v in common.efa_env(d).items()] if disaggregated else []
    volumes, mounts = common.file_system_volume(spec, d)
    container: Dict[str, Any] = {
        "name": "main", "image": image(d), "command": ["python3", "-m", MODULES[d.engine]], "args": args,
        "resources": common.worker_resources(layout, group.instance.efa_interfaces, disaggregated),
        "volumeMounts": mounts, "env": env,
    }
    pod: Dict[str, Any] = {"serviceAccountName": common.SERVICE_ACCOUNT, "containers": [container],
                           "nodeSelector": {labels.GROUP: group.name}}
    if disaggregated:
        # NIXL registers GPU memory with the EFA device (fi_mr_reg): privileged, IPC_LOCK, host IPC and a large
        # /dev/shm, as the Dynamo EFA guide's "Pod Resource Requests" gives them
        container["securityContext"] = {"privileged": True, "capabilities": {"add": ["IPC_LOCK"]}}
        pod["hostIPC"] = True
        container["volumeMounts"] = mounts + [{"name": "shm", "mountPath": "/dev/shm"}]  # noqa: S108 - the shared-memory mount NIXL stages through
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": common.SHM_SIZE}})
    if volumes:
        pod["volumes"] = volumes
    component: Dict[str, Any] = {
        "name": _component_name(role), "type": role or "worker", "replicas": max(replicas.min, 1),
        "scalingAdapter": {},
        "podTemplate": {"metadata": {"labels": {"fmcluster.io/model": d.name, "fmcluster.io/pool": adapter_name(d, role),
                                                 METRICS_PORT_LABEL: str(SYSTEM_PORT)}}, "spec": pod},
    }
    if layout.pipeline > 1:
        component["multinode"] = {"nodeCount": layout.pipeline}
    return component


def graph(spec: Any, d: Deployment, namespace: str) -> Dict[str, Any]:
    """The DynamoGraphDeployment of one deployment: the frontend on the system nodes, and its worker pools."""
    group = next(g for g in spec.node_groups if g.name == d.node_group)
    frontend = {
        "name": "Frontend", "type": "frontend", "replicas": 2,
        "podTemplate": {"metadata": {"labels": {"fmcluster.io/model": d.name, METRICS_PORT_LABEL: str(common.PORT)}},
                        "spec": {"containers": [{"name": "main", "image": image(d)}],
                                 "nodeSelector": {labels.GROUP: "system"}}},
    }
    components = [frontend]
    for _, role, replicas, layout in serving_rules.pool_layouts(d, group.instance_type):
        components.append(_worker(spec, d, layout, role, replicas, group))
    return {"apiVersion": API, "kind": "DynamoGraphDeployment",
            "metadata": {"name": d.name, "namespace": namespace, "labels": {"fmcluster.io/model": d.name}},
            "spec": {"backendFramework": d.engine, "components": components}}


def scalers(spec: Any, d: Deployment, namespace: str, *, workspace_url: str) -> List[Dict[str, Any]]:
    """One ScaledObject per worker pool, on its load and its KV cache, within the pool's replicas."""
    group = next(g for g in spec.node_groups if g.name == d.node_group)
    out = []
    for _, role, replicas, layout in serving_rules.pool_layouts(d, group.instance_type):
        pool = adapter_name(d, role)
        load, kv = LOAD_QUERIES[d.engine]
        so = common.scaled_object(
            name=pool, namespace=namespace,
            target={"apiVersion": ADAPTER_API, "kind": "DynamoGraphDeploymentScalingAdapter", "name": pool},
            replicas=replicas, query=load % (pool, pool),
            threshold=common.target_concurrency(d, layout, role), region=spec.region, workspace_url=workspace_url,
            auth=AUTH)
        so["spec"]["triggers"].append({**copy.deepcopy(so["spec"]["triggers"][0]), "metadata": {
            **so["spec"]["triggers"][0]["metadata"], "query": kv % pool,
            "threshold": f"{KV_TARGET:g}"}})
        out.append(so)
    return out


def endpoint(spec: Any, d: Deployment) -> ServingEndpoint:
    """The frontend's Service the operator creates (`<name>-frontend`, port 8000)."""
    ns = spec.serving.namespace
    volumes, mounts = common.file_system_volume(spec, d)
    return ServingEndpoint(
        url=f"http://{d.name}-frontend.{ns}.svc.cluster.local:{common.PORT}", served_name=d.name,
        tokenizer=common.model_path(spec, d), volumes=volumes, volume_mounts=mounts,
        node_selector={labels.GROUP: "system"}, service_account=common.SERVICE_ACCOUNT)


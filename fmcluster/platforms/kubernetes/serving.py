"""What both Kubernetes kinds render for a `serving` deployment, whatever runs it (NVIDIA Dynamo on eks, the HyperPod
Inference Operator on hyperpod-eks): where the engine reads the weights, its arguments for a role, the EFA settings of
a disaggregated worker, the serving namespace's objects and the KEDA scalers (docs/serving.md). Plain functions of the
spec; the tests validate what they render offline against the Kubernetes and CRD schemas."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

from fmcluster.spec import serving as serving_rules
from fmcluster.spec.serving import Deployment

MODELS = serving_rules.MODELS  # where a hub model is staged on the shared file system
PORT = 8000  # the engines' OpenAI-compatible HTTP port
SERVICE_ACCOUNT = "model-server"  # the serving pods' account: S3 read of the weights' prefixes (Pod Identity)

# NIXL's LIBFABRIC backend and the EFA settings NVIDIA's Dynamo guide "EFA on AWS" gives for disaggregated workers on
# EKS (docs/kubernetes/installation/rdma-setup/efa-on-aws at ai-dynamo/dynamo a0245de5: "Required EFA environment
# variables" and "Recommended EFA performance tuning"); the images are AWS's Dynamo runtime images with EFA, which put
# the EFA libraries on the loader path themselves (the guide's LD_LIBRARY_PATH line expands a shell variable that
# Kubernetes does not). tests/orchestrators/<kind>/test_serving.py holds the manifests to this list.
EFA_ENV: Dict[str, str] = {
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    "FI_EFA_ENABLE_SHM_TRANSFER": "0",
    "FI_EFA_ENABLE_SHM": "0",
    "FI_EFA_FORK_SAFE": "0",
    "FI_EFA_USE_HUGE_PAGE": "1",
    "FI_EFA_MR_MAX_CACHED_COUNT": "524288",
    "FI_EFA_MR_MAX_CACHED_SIZE": "0",
}
EFA_SOURCE = ("https://github.com/ai-dynamo/dynamo/blob/a0245de57fab2f7963bc3238d83e22132f26568e/docs/fern/pages/"
              "kubernetes/installation/rdma-setup/efa-on-aws.mdx")
HUGEPAGES_2MI = "5120Mi"  # "When using FI_EFA_USE_HUGE_PAGE=1, also add hugepages-2Mi: 5120Mi to the pod resource limits"
VLLM_KV_TRANSFER = {"kv_connector": "NixlConnector", "kv_role": "kv_both",
                    "kv_connector_extra_config": {"backends": ["LIBFABRIC"]}}
SGLANG_NIXL_ENV = {"SGLANG_DISAGGREGATION_NIXL_BACKEND": "LIBFABRIC"}
SHM_SIZE = "80Gi"  # the guide's /dev/shm emptyDir for NIXL's staging


def model_path(spec: Any, d: Deployment) -> str:
    """What the engine loads: a directory on the shared file system (the source's, or a hub model staged there), or
    the S3 URI a streaming loader reads."""
    if d.source.s3 is not None:
        return d.source.s3
    _, section = spec.storage.file_system()
    return f"{section.mount_point.rstrip('/')}{d.file_system_path()}"


def file_system_volume(spec: Any, d: Deployment) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(pod volumes, container mounts) that give a pod the shared file system read-only by its store's claim, where
    the deployment's weights are on it; none for weights read from S3."""
    found = spec.storage.file_system()
    if found is None or d.file_system_path() is None:
        return [], []
    _, section = found
    return ([{"name": section.claim, "persistentVolumeClaim": {"claimName": section.claim}}],
            [{"name": section.claim, "mountPath": section.mount_point, "readOnly": True}])


def streams_from_s3(d: Deployment) -> bool:
    return d.source.s3 is not None


def engine_args(spec: Any, d: Deployment, layout: serving_rules.Layout, role: str = "") -> List[str]:
    """The engine's arguments for one pool (role: "" aggregated, "prefill" or "decode"): the model, its served name,
    parallel sizes, context, the engine's memory share and, when disaggregated, NIXL over EFA."""
    path = model_path(spec, d)
    if d.engine == "vllm":
        args = ["--model", path, "--served-model-name", d.name, "--tensor-parallel-size", str(layout.tensor),
                "--pipeline-parallel-size", str(layout.pipeline), "--max-model-len", str(d.workload.max_context),
                "--gpu-memory-utilization", "0.90"]
        if layout.expert > 1:
            args.append("--enable-expert-parallel")
        if d.kv_cache == "fp8":
            args += ["--kv-cache-dtype", "fp8"]
        if streams_from_s3(d):
            # Run:ai Model Streamer reads safetensors from S3 into GPU memory; its concurrency, distributed over a
            # tensor-parallel replica's ranks (docs.vllm.ai, "Loading models with Run:ai Model Streamer")
            args += ["--load-format", "runai_streamer", "--model-loader-extra-config",
                     json.dumps({"concurrency": 16, "distributed": layout.tensor > 1}, separators=(",", ":"))]
        if role:
            args += ["--kv-transfer-config", json.dumps(VLLM_KV_TRANSFER, separators=(",", ":"))]
        return args
    args = ["--model-path", path, "--served-model-name", d.name, "--tp-size", str(layout.tensor),
            "--pp-size", str(layout.pipeline), "--context-length", str(d.workload.max_context),
            "--mem-fraction-static", "0.88", "--enable-metrics"]
    if layout.expert > 1:
        args += ["--ep-size", str(layout.expert)]
    if d.kv_cache == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    if streams_from_s3(d):
        # detected from the s3:// path; named for clarity (docs.sglang.io, "Loading Models from Object Storage")
        args += ["--load-format", "runai_streamer"]
    if role:
        args += ["--disaggregation-mode", role, "--disaggregation-transfer-backend", "nixl"]
    return args


def efa_env(d: Deployment) -> Dict[str, str]:
    """A disaggregated worker's environment: the EFA settings, and SGLang's NIXL backend selection."""
    return {**EFA_ENV, **(SGLANG_NIXL_ENV if d.engine == "sglang" else {})}


def hugepages_share(tensor: int, per_node: int) -> str:
    """One worker's 2 MiB hugepages: the guide's 5120Mi, or less where several workers share a node, so that the
    node's EFA-driver pool (allocatable.EFA_HUGEPAGES_2MI, 5128 pages) holds every worker that fits its GPUs
    (libfabric falls back to regular pages for what it cannot map, fi_efa(7) FI_EFA_USE_HUGE_PAGE; unverified)."""
    from fmcluster.platforms.kubernetes.allocatable import EFA_HUGEPAGES_2MI

    pages = EFA_HUGEPAGES_2MI // (2 * 2**20) * tensor // max(per_node, tensor)
    return f"{min(pages * 2, int(HUGEPAGES_2MI[:-2]))}Mi"


def worker_resources(layout: serving_rules.Layout, efa_per_node: int, disaggregated: bool) -> Dict[str, Any]:
    """One worker pod's requests: its GPUs (a pipeline stage's are one node's), and when disaggregated the EFA
    interfaces of those GPUs' share of the node and its share of the node's hugepages."""
    gpus = str(layout.tensor)
    limits: Dict[str, str] = {"nvidia.com/gpu": gpus}
    if disaggregated and efa_per_node:
        per_node = layout.replica.hw.per_node or 1
        limits["vpc.amazonaws.com/efa"] = str(max(1, efa_per_node * layout.tensor // per_node))
        limits["hugepages-2Mi"] = hugepages_share(layout.tensor, per_node)
    return {"limits": limits, "requests": dict(limits)}


def scaled_object(*, name: str, namespace: str, target: Dict[str, str], replicas: Any, query: str, threshold: float,
                  region: str, workspace_url: str, auth: str) -> Dict[str, Any]:
    """A KEDA ScaledObject on the AMP workspace (Prometheus scaler, AWS auth through KEDA's own Pod Identity:
    identityOwner operator), between the pool's min and max replicas (https://keda.sh/docs/2.18/scalers/prometheus/)."""
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": dict(target),
            "minReplicaCount": replicas.min, "maxReplicaCount": replicas.max,
            "pollingInterval": 30, "cooldownPeriod": 300,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                "scaleDown": {"stabilizationWindowSeconds": 600, "policies": [
                    {"type": "Pods", "value": 1, "periodSeconds": 300}]}}}},
            "triggers": [{
                "type": "prometheus", "authenticationRef": {"name": auth},
                "metadata": {"serverAddress": workspace_url, "query": query, "threshold": f"{threshold:g}",
                             "awsRegion": region, "identityOwner": "operator"},
            }],
        },
    }


def trigger_authentication(name: str, namespace: str) -> Dict[str, Any]:
    """KEDA's TriggerAuthentication using the operator's own AWS identity (EKS Pod Identity)."""
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"podIdentity": {"provider": "aws"}}}


def target_concurrency(d: Deployment, layout: serving_rules.Layout, role: str = "") -> float:
    """The requests one replica of a pool should hold, for its scaler (the plan's operating point): aggregated, the
    most sequences within both SLOs; a decode pool, the most whose decode step meets the TPOT SLO; a prefill pool,
    the prompts it can have in hand and still start each within the TTFT SLO. A pool that cannot meet the SLOs
    aims at a quarter of what its cache holds."""
    from fmcluster.spec import serving_sizing as sizing

    r, w = layout.replica, d.workload
    context = w.prompt_tokens + w.output_tokens / 2
    if role == "prefill":
        return float(max(1, int(d.slo.ttft_ms / 1e3 / max(r.prefill_s(w.prompt_tokens), 1e-6))))
    if role == "decode":
        best = 0
        for c in range(1, r.sequences(context) + 1):
            if r.decode_step_s(c, context) * 1e3 > d.slo.tpot_ms:
                break
            best = c
        return float(best or max(1, r.sequences(context) // 4))
    load = sizing.operating_point(r, w.prompt_tokens, w.output_tokens, d.slo.ttft_ms / 1e3, d.slo.tpot_ms / 1e3)
    return float(int(load.concurrency)) if load is not None else float(max(1, r.sequences(context) // 4))

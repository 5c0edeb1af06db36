"""The hyperpod-eks kind's serving: AWS's HyperPod Inference Operator, installed as its EKS add-on
(amazon-sagemaker-hyperpod-inference) with the roles and dependency add-ons AWS's migration script creates, runs each
`serving` deployment as an InferenceEndpointConfig: a vLLM or SGLang worker, or (pdSpec) prefill and decode workers
wired by the operator with LMCache and NIXL over EFA; the operator's KEDA scales each on the engines' load in the AMP
workspace (docs/serving.md, "hyperpod-eks: the HyperPod Inference Operator")."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from fmcluster.platforms.kubernetes import serving as common
from fmcluster.platforms.kubernetes.load_test import ServingEndpoint
from fmcluster.platforms.storage import HYPERPOD_INFERENCE, Mounts
from fmcluster.spec import serving as serving_rules
from fmcluster.spec.serving import Deployment

API = "inference.sagemaker.aws.amazon.com/v1"
ADDON = "amazon-sagemaker-hyperpod-inference"
OPERATOR_NAMESPACE = "hyperpod-inference-system"
CONTROLLER_SERVICE_ACCOUNT = "hyperpod-inference-controller-manager"
KEDA_SERVICE_ACCOUNT = "keda-operator"
# The operator's execution role's managed policy, and the add-on's dependency add-ons at the versions AWS's migration
# script installs (aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart/charts/inference-operator/migration/
# helm_to_addon.sh at a00b22d1).
EXECUTION_POLICY = "AmazonSageMakerHyperPodInferenceAccess"
SOURCE = ("https://github.com/aws/sagemaker-hyperpod-cli/blob/a00b22d17ea928a6e39a43bd2efdafe01b1005ea/helm_chart/"
          "HyperPodHelmChart/charts/inference-operator/migration/helm_to_addon.sh")
# Worker images: AWS's vLLM container for HyperPod, the image the disaggregated-serving guide names (vLLM with
# LMCache, NIXL and EFA's libfabric; https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-
# deployment-dpd.html), and for SGLang AWS's Dynamo SGLang runtime image, which carries SGLang 0.5.21 and its server
# (https://aws.github.io/deep-learning-containers/dynamo/).
IMAGES = {"vllm": "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1",
          "sglang": "public.ecr.aws/deep-learning-containers/dynamo:1.6.2-sglang-runtime-v1"}
COMMANDS = {"vllm": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
            "sglang": ["python3", "-m", "sglang.launch_server"]}
MODEL_MOUNT = "/opt/ml/model"  # where the operator mounts the model source in the worker (modelVolumeMount default)
LOAD_QUERIES = {
    "vllm": ('sum(vllm:num_requests_running{model_name="%s"}) + sum(vllm:num_requests_waiting{model_name="%s"})'),
    "sglang": ('sum(sglang:num_running_reqs{model_name="%s"}) + sum(sglang:num_queue_reqs{model_name="%s"})'),
}


def _args(spec: Any, d: Deployment, layout: serving_rules.Layout) -> List[str]:
    """The engine's arguments with the model at the operator's mount (its source is mounted there, not streamed)."""
    args = common.engine_args(spec, d, layout)
    flag = "--model" if d.engine == "vllm" else "--model-path"
    args[args.index(flag) + 1] = MODEL_MOUNT
    for drop in ("--load-format", "--model-loader-extra-config"):  # the operator mounts S3: no streaming loader
        if drop in args:
            i = args.index(drop)
            del args[i:i + 2]
    return args + ["--port", str(common.PORT)] + (["--host", "0.0.0.0"] if d.engine == "sglang" else [])  # noqa: S104


def file_system_source(mounts: Mounts) -> Optional[Mapping[str, Any]]:
    """The operator's model source on the shared file system, as the store's mount writes it (its
    `HYPERPOD_INFERENCE` form), or None where no mount gives one."""
    return next((m.services[HYPERPOD_INFERENCE] for m in mounts.served_by(HYPERPOD_INFERENCE)), None)


def _source(d: Deployment, region: str, file_system: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The model's source: its S3 prefix, or its directory on the shared file system in the form the file system's
    mount gives the operator (`file_system`, the mount's `HYPERPOD_INFERENCE` service form)."""
    if d.source.s3 is not None:
        bucket, _, prefix = d.source.s3[len("s3://"):].partition("/")
        return {"modelSourceType": "s3", "s3Storage": {"bucketName": bucket, "region": region},
                "modelLocation": prefix.rstrip("/")}
    path = d.file_system_path()
    if path is None or file_system is None:
        raise ValueError(f"serving model {d.name}: its weights are on the shared file system, and no mount gives the "
                         "inference operator a model source")
    form = dict(file_system)
    return {"modelSourceType": form.pop("modelSourceType"), "modelLocation": path.lstrip("/"), **form}


def _trigger(d: Deployment, target: float, workspace_url: str, name: str) -> Dict[str, Any]:
    return {"name": name, "query": LOAD_QUERIES[d.engine] % (d.name, d.name), "serverAddress": workspace_url,
            "targetValue": target, "metricType": "Average"}


def _scaling(d: Deployment, replicas: Any, target: float, workspace_url: Optional[str], name: str) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"minReplicaCount": replicas.min, "maxReplicaCount": replicas.max, "pollingInterval": 30,
                            "cooldownPeriod": 300, "scaleDownStabilizationTime": 600}
    if workspace_url:
        spec["prometheusTrigger"] = _trigger(d, target, workspace_url, name)
    return spec


def endpoint_config(spec: Any, d: Deployment, namespace: str, *, workspace_url: Optional[str],
                    file_system: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The InferenceEndpointConfig of one deployment; `file_system`: the operator's model source on the shared file
    system, as its store's mount gives it."""
    group = next(g for g in spec.node_groups if g.name == d.node_group)
    node_selector = {"sagemaker.amazonaws.com/instance-group-name": group.name}
    pools = d.pools()
    layouts = [(role, lay) for _, role, _, lay in serving_rules.pool_layouts(d, group.instance_type)]
    first = layouts[0][1]
    worker: Dict[str, Any] = {
        "image": IMAGES[d.engine], "command": COMMANDS[d.engine], "args": _args(spec, d, first),
        "modelInvocationPort": {"containerPort": common.PORT, "name": "http"},
        "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_MOUNT},
        "resources": common.worker_resources(first, 0, False),
    }
    body: Dict[str, Any] = {
        "modelName": d.name, "instanceType": f"ml.{group.instance_type}" if not group.instance_type.startswith("ml.")
        else group.instance_type,
        "replicas": max(pools[0][2].min, 1), "invocationEndpoint": "v1/completions",
        "modelSourceConfig": _source(d, spec.region, file_system), "nodeAffinity": None, "worker": worker,
        "metrics": {"enabled": True, "modelMetrics": {"port": common.PORT, "path": "/metrics"}},
    }
    del body["nodeAffinity"]  # instanceType places the pods; the group's nodes are that type
    if d.mode == "aggregated":
        replicas = pools[0][2]
        body["autoScalingSpec"] = _scaling(d, replicas, common.target_concurrency(d, first), workspace_url, d.name)
    else:
        worker["environmentVariables"] = [{"name": k, "value": v} for k, v in common.efa_env(d).items()]
        body["pdSpec"] = {"routingThreshold": 0, "topologySpec": {"sameAZ": True}}
        scaling: Dict[str, Any] = {}
        for (role, lay), (_, _, replicas) in zip(layouts, pools):
            key = "prefillSpec" if role == "prefill" else "decodingSpec"
            body["pdSpec"][key] = {
                "replicas": max(replicas.min, 1), "args": _args(spec, d, lay), "nodeSelector": node_selector,
                "resources": common.worker_resources(lay, group.instance.efa_interfaces, True),
            }
            scaling["prefillAutoScaling" if role == "prefill" else "decodingAutoScaling"] = _scaling(
                d, replicas, common.target_concurrency(d, lay, role), workspace_url, f"{d.name}-{role}")
        body["pdSpec"]["autoScalingSpec"] = scaling
    return {"apiVersion": API, "kind": "InferenceEndpointConfig",
            "metadata": {"name": d.name, "namespace": namespace, "labels": {"fmcluster.io/model": d.name}},
            "spec": body}


def endpoint(spec: Any, d: Deployment) -> ServingEndpoint:
    """The operator names the Deployment it runs (status.deploymentStatus.name); the load test reaches its pods
    through a Service the person exposes first, named `<name>-direct`."""
    ns = spec.serving.namespace
    expose = (f"kubectl -n {ns} expose deployment $(kubectl -n {ns} get inferenceendpointconfig {d.name} "
              f"-o jsonpath='{{.status.deploymentStatus.name}}') --name {d.name}-direct --port {common.PORT} "
              f"--target-port {common.PORT}")
    volumes, mounts = common.file_system_volume(spec, d)
    return ServingEndpoint(
        url=f"http://{d.name}-direct.{ns}.svc.cluster.local:{common.PORT}", served_name=d.name,
        tokenizer=common.model_path(spec, d), setup=[expose], volumes=volumes, volume_mounts=mounts,
        node_selector={"sagemaker.amazonaws.com/instance-group-name": "system"},
        service_account=common.SERVICE_ACCOUNT)


def addon_configuration(*, execution_role_arn: str, tls_bucket: str, cluster_arn: str, keda_role_arn: str
                        ) -> Dict[str, Any]:
    """The add-on's configuration, in the keys AWS's migration script sets; the ALB is off: models are served inside
    the cluster (expose them through your own ingress)."""
    return {"executionRoleArn": execution_role_arn, "tlsCertificateS3Bucket": tls_bucket,
            "hyperpodClusterArn": cluster_arn, "alb": {"enabled": False},
            "keda": {"enabled": True, "auth": {"aws": {"irsa": {"enabled": True, "roleArn": keda_role_arn}}}}}

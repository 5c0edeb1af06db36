"""What the eks kind installs for a `serving` section (docs/serving.md, "eks: NVIDIA Dynamo"): the Dynamo platform
chart (operator and CRDs), KEDA with a Pod Identity role that may query the AMP workspace, the serving namespace with
the model servers' account (a Pod Identity role reading the S3 prefixes the models stream from) and the shared file
system's claim, and per deployment its DynamoGraphDeployment and KEDA scalers."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from aws_cdk import Fn, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from fmcluster.nag import acknowledge
from fmcluster.orchestrators.eks import serving
from fmcluster.platforms.kubernetes import labels, pod_identity, volumes
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.platforms.kubernetes.charts import ClusterObjects
from fmcluster.platforms.kubernetes.cluster import EksControlPlane
from fmcluster.platforms.storage import Mounts


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("-"))


def amp_query_statement(workspace_arn: str) -> iam.PolicyStatement:
    """Reading the workspace's metrics (KEDA's Prometheus scaler), nothing else."""
    return iam.PolicyStatement(sid="QueryServingMetrics", resources=[workspace_arn],
                               actions=["aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata"])


def s3_read_statements(stack: Stack, uris: Sequence[str]) -> List[iam.PolicyStatement]:
    """Listing and reading the models' S3 prefixes only (Run:ai Model Streamer lists, then ranges each object)."""
    out = []
    for i, uri in enumerate(sorted(set(uris)), 1):
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        arn = f"arn:{stack.partition}:s3:::{bucket}"
        out.append(iam.PolicyStatement(sid=f"ListModel{i}", actions=["s3:ListBucket"], resources=[arn],
                                       conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}}))
        out.append(iam.PolicyStatement(sid=f"ReadModel{i}", actions=["s3:GetObject"], resources=[f"{arn}/{prefix}*"]))
    return out


def add_model_reads(role: iam.Role, stack: Stack, uris: Sequence[str]) -> None:
    """`s3_read_statements` on `role`, each prefix acknowledged: the objects below a model's prefix are its files."""
    from fmcluster.constructs.bucket_deployment import nag_resource

    for statement in s3_read_statements(stack, uris):
        role.add_to_policy(statement)
    for uri in sorted(set(uris)):
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        arn = nag_resource(stack, f"arn:{stack.partition}:s3:::{bucket}/{prefix}")
        acknowledge(role, f"AwsSolutions-IAM5[Resource::{arn}*]",
                    "A model is every object below its S3 prefix (safetensors shards, config, tokenizer): read-only, "
                    "that prefix only.")


def workspace_url(stack: Stack, workspace_arn: str) -> str:
    """The AMP workspace's Prometheus-compatible base URL (arn:...:workspace/<id>)."""
    return f"https://aps-workspaces.{stack.region}.amazonaws.com/workspaces/{Fn.select(1, Fn.split('/', workspace_arn))}"


def install(scope: Construct, *, spec: Any, control_plane: EksControlPlane, objects: ClusterObjects,
            workspace_arn: Optional[str], mounts: Mounts, after: Sequence[IConstruct]) -> Dict[str, IConstruct]:
    """Everything the serving section needs in the cluster, after `after` (the system nodes and Pod Identity)."""
    section = spec.serving
    ns = section.namespace
    stack = Stack.of(scope)
    on_system = {labels.GROUP: "system"}
    cluster_name = control_plane.cluster.cluster_name
    dynamo = objects.chart("dynamo-platform", namespace=serving.DYNAMO_NAMESPACE, wait=True, after=list(after),
                           values={"dynamo-operator": {"controllerManager": {"nodeSelector": on_system}}})
    uris = [d.source.s3 for d in section.models if d.source.s3]
    role = control_plane.pod_identity_role(
        "ModelServerRole", f"model servers ({ns}/{common.SERVICE_ACCOUNT}) of {spec.name}")
    add_model_reads(role, stack, uris)
    identity = pod_identity.associate(scope, "ModelServerPodIdentity", cluster_name=cluster_name, namespace=ns,
                                      service_account=common.SERVICE_ACCOUNT, role=role)
    namespace = objects.manifest("ServingNamespace", [volumes.namespace(ns),
                                                      pod_identity.service_account(common.SERVICE_ACCOUNT, ns)],
                                 after=[identity])
    needs_fsx = any(d.source.s3 is None for d in section.models)
    for mount, volume in mounts.volumes():
        if needs_fsx:
            from dataclasses import replace

            objects.manifest(f"Serving{mount.id}", volumes.static_volume(
                cluster=spec.name, namespace=ns, volume=replace(volume, name=f"{volume.name}-{ns}")),
                after=[namespace, control_plane.addons[volume.addon]])
    built: Dict[str, IConstruct] = {"dynamo": dynamo, "namespace": namespace}
    url: Optional[str] = None
    scaled_after: List[IConstruct] = []
    if workspace_arn is not None:
        keda_role = control_plane.pod_identity_role(
            "KedaRole", f"KEDA ({serving.KEDA_NAMESPACE}/{serving.KEDA_SERVICE_ACCOUNT}) of {spec.name}",
            [amp_query_statement(workspace_arn)])
        keda_identity = pod_identity.associate(scope, "KedaPodIdentity", cluster_name=cluster_name,
                                               namespace=serving.KEDA_NAMESPACE,
                                               service_account=serving.KEDA_SERVICE_ACCOUNT, role=keda_role)
        keda = objects.chart("keda", namespace=serving.KEDA_NAMESPACE, wait=True, after=[*after, keda_identity],
                             values={"nodeSelector": on_system})
        auth = objects.manifest("ServingScalerAuth", [common.trigger_authentication(serving.AUTH, ns)],
                                after=[keda, namespace])
        url = workspace_url(stack, workspace_arn)
        scaled_after = [keda, auth]
        built["keda"] = keda
    for d in section.models:
        docs = [serving.graph(spec, d, ns)]
        if url is not None:
            docs += serving.scalers(spec, d, ns, workspace_url=url)
        built[d.name] = objects.manifest(f"Model{_camel(d.name)}", docs, after=[dynamo, namespace, *scaled_after])
    return built

"""What the eks kind installs for a `serving` section (docs/serving.md, "eks: NVIDIA Dynamo"): the Dynamo platform
chart (operator and CRDs), KEDA with a Pod Identity role that may query the AMP workspace, the serving namespace with
the model servers' account (a Pod Identity role reading the S3 prefixes the models stream from) and the shared file
system's claim, and per deployment its DynamoGraphDeployment and KEDA scalers."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from aws_cdk import Stack
from constructs import Construct, IConstruct

from fmcluster.orchestrators.eks import serving
from fmcluster.platforms.kubernetes import labels, pod_identity, volumes
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.platforms.kubernetes.charts import ClusterObjects
from fmcluster.platforms.kubernetes.cluster import EksControlPlane
from fmcluster.platforms.kubernetes.serving_access import add_model_reads, amp_query_statement, workspace_url
from fmcluster.platforms.storage import Mounts


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("-"))


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
    needs_shared = any(d.source.s3 is None for d in section.models)
    for mount, volume in mounts.volumes():
        if needs_shared:
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

"""Amazon EKS on the cluster's EFA node groups, composed from the spec: the control plane and its add-ons, the GPU
managed node groups and the system group, then what runs in the cluster (device plugins, the scheduler and its queue
objects, the shared file system's volume, the node gate) and the AMP managed scraper. docs/eks.md explains each."""

from __future__ import annotations

from typing import Dict

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.bucket_deployment import nag_resource
from fmcluster.constructs.node_group import Ec2NodeGroup
from fmcluster.nag import acknowledge
from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.orchestrators.eks.node_groups import EksNodeGroups
from fmcluster.orchestrators.eks.settings import SYSTEM_GROUP, EksOrchestrator
from fmcluster.platforms.ec2.access import find_instance_command
from fmcluster.platforms.kubernetes import (
    autoscaler,
    devices,
    gangs,
    gate,
    kuberay,
    kueue,
    labels,
    metrics,
    pod_identity,
    volumes,
)
from fmcluster.platforms.kubernetes.access import tunnel_command
from fmcluster.platforms.kubernetes.charts import ClusterObjects
from fmcluster.platforms.kubernetes.control_plane import add_standard_addons, build_control_plane
from fmcluster.platforms.kubernetes.scraper import ManagedScraper

# The service account training pods run as in the training namespace: EKS Pod Identity gives it the workload role,
# which the cluster stack grants the data bucket (docs/eks.md, "Credentials on the nodes").
WORKLOAD_SERVICE_ACCOUNT = "fmcluster-training"


class EksOrchestration(Construct):
    """Exposes ``control_plane`` (`EksControlPlane`), ``cluster``, ``nodes`` (`EksNodeGroups`), ``node_groups`` (spec
    group name -> `Ec2NodeGroup`, which the cluster stack outputs), ``workload_role`` (the Pod Identity role of the
    training namespace's ``fmcluster-training`` service account) and ``grantee`` (that role: the data bucket is
    granted to the workloads, not to the nodes)."""

    def __init__(self, scope: Construct, id: str, *, context: OrchestrationContext) -> None:
        super().__init__(scope, id)
        spec = context.spec
        settings = EksOrchestrator.of(spec).eks
        self.control_plane = build_control_plane(
            self, cluster_name=spec.name, vpc=context.vpc, node_subnet=context.subnets[0],
            extra_subnets=context.extra_subnets, security_group=context.security_groups[0], settings=settings)
        self.cluster = self.control_plane.cluster
        self._addons(context)
        self.nodes = EksNodeGroups(self, "Nodes", context=context, cluster=self.control_plane.icluster)
        for managed in self.nodes.managed.values():
            # nodes join once the CNI, kube-proxy and Pod Identity run
            for name in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent"):
                managed.node.add_dependency(self.control_plane.addons[name])
        namespace = settings.training_namespace
        self.workload_role = self.control_plane.pod_identity_role(
            "WorkloadRole", f"training pods ({namespace}/{WORKLOAD_SERVICE_ACCOUNT}) of {spec.name}")
        self.workload_identity = pod_identity.associate(
            self, "WorkloadPodIdentity", cluster_name=self.cluster.cluster_name, namespace=namespace,
            service_account=WORKLOAD_SERVICE_ACCOUNT, role=self.workload_role)
        self.objects = ClusterObjects(self, "Objects", cluster=self.control_plane.icluster)
        self._install(context)
        if autoscaler.elastic_groups(spec.node_groups):
            self._autoscaler(context)
        stack = Stack.of(self)
        CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        CfnOutput(self, "KubeconfigCommand", value=f"aws eks update-kubeconfig --region {stack.region} "
                  f"--name {spec.name}")
        host = Fn.select(2, Fn.split("/", self.cluster.cluster_endpoint))  # https://<host>
        CfnOutput(self, "ApiEndpointHost", value=host)
        if not settings.endpoint.public:
            node = f"$({find_instance_command(region=spec.region, cluster=spec.name, group=SYSTEM_GROUP)})"
            CfnOutput(self, "ApiTunnelCommand", value=tunnel_command(region=spec.region, target=node, endpoint_host=host),
                      description="Forwards localhost:8443 to the private API endpoint through a system node; then "
                      "KubeconfigCommand and: kubectl config set-cluster <cluster ARN> --server=https://127.0.0.1:8443 "
                      "--tls-server-name=<ApiEndpointHost>")

    def _install(self, context: OrchestrationContext) -> None:
        """Device plugins, the training namespace (and the file system's claim in it), the scheduler and its queue."""
        spec = context.spec
        settings = EksOrchestrator.of(spec).eks
        objects = self.objects
        system = self.nodes.managed[SYSTEM_GROUP]
        node_gate = objects.manifest("NodeGate", gate.objects(groups=[g.name for g in spec.node_groups],
                                                              policy=spec.validation_policy))
        if context.metrics_workspace_arn is not None:
            objects.manifest("Exporters", metrics.exporter_objects(
                system_selector={labels.GROUP: SYSTEM_GROUP},
                gpu_instance_types=[g.instance_type for g in spec.node_groups if g.instance.is_gpu]),
                after=[node_gate])
            self.scraper = ManagedScraper(
                self, "Scraper", alias=f"fmcluster-{spec.name}", cluster_arn=self.cluster.cluster_arn,
                subnets=context.subnets[:1] + context.extra_subnets, security_groups=context.security_groups[:1],
                workspace_arn=context.metrics_workspace_arn,
                config=metrics.scrape_config(cluster=spec.name, interval_s=spec.observability.scrape_interval_seconds,
                                             serving_namespace=spec.serving.namespace if spec.serving else None))
        objects.chart("nvidia-device-plugin", namespace="kube-system", values=devices.nvidia_device_plugin())
        if any(g.efa_enabled for g in spec.node_groups):
            if settings.efa_device == "dra":
                objects.chart("aws-dranet", namespace="kube-system", values=devices.efa_dra_driver())
            else:
                objects.chart("aws-efa-k8s-device-plugin", namespace="kube-system",
                              values=devices.efa_device_plugin())
        namespace = objects.manifest("TrainingNamespace", [
            volumes.namespace(settings.training_namespace),
            pod_identity.service_account(WORKLOAD_SERVICE_ACCOUNT, settings.training_namespace),
        ])
        if settings.efa_device == "dra" and any(g.efa_enabled for g in spec.node_groups):
            objects.manifest("EfaClaimTemplate", devices.efa_claim_templates(spec.node_groups,
                                                                             settings.training_namespace),
                             after=[namespace])
        for mount, volume in context.mounts.volumes():
            objects.manifest(mount.id, volumes.static_volume(
                cluster=spec.name, namespace=settings.training_namespace, volume=volume,
            ), after=[namespace, self.control_plane.addons[volume.addon]])
        on_system = {labels.GROUP: SYSTEM_GROUP}
        if settings.scheduler == "kueue":
            chart = objects.chart("kueue", namespace=kueue.NAMESPACE, wait=True, after=[system],
                                  values=kueue.chart_values(settings, system_selector=on_system))
            objects.manifest("KueueQueues", kueue.queue_objects(spec.node_groups, settings), after=[chart, namespace])
        elif settings.scheduler == "volcano":
            chart = objects.chart("volcano", namespace=gangs.VOLCANO_NAMESPACE, wait=True, after=[system],
                                  values=gangs.volcano_values(spec.node_groups, system_selector=on_system))
            objects.manifest("VolcanoQueues", gangs.volcano_objects(spec.node_groups), after=[chart])
        else:
            chart = objects.chart("kai-scheduler", namespace=gangs.KAI_NAMESPACE, wait=True, after=[system],
                                  values=gangs.kai_values(system_selector=on_system))
            objects.manifest("KaiQueues", gangs.kai_objects(spec.node_groups), after=[chart])
        # Ray's operator, after the scheduler that admits its jobs (docs/post-training.md)
        objects.chart("kuberay-operator", namespace=kuberay.NAMESPACE, release=kuberay.RELEASE, after=[system, chart],
                      values=kuberay.chart_values(system_selector=on_system, scheduler=settings.scheduler))
        if spec.serving is not None:  # models served by NVIDIA Dynamo, scaled by KEDA (docs/serving.md)
            from fmcluster.orchestrators.eks import serving_install

            self.serving = serving_install.install(
                self, spec=spec, control_plane=self.control_plane, objects=objects,
                workspace_arn=context.metrics_workspace_arn, mounts=context.mounts,
                after=[system, self.control_plane.addons["eks-pod-identity-agent"]])

    def _autoscaler(self, context: OrchestrationContext) -> None:
        """Cluster Autoscaler on the system nodes, for the elastic groups, with its Pod Identity role (docs/eks.md,
        "Elastic node groups")."""
        spec = context.spec
        stack = Stack.of(self)
        self.autoscaler_role = self.control_plane.pod_identity_role(
            "AutoscalerRole", f"Cluster Autoscaler ({autoscaler.NAMESPACE}/{autoscaler.SERVICE_ACCOUNT}) of {spec.name}",
            autoscaler.policy_statements(stack, cluster_name=spec.name))
        acknowledge(self.autoscaler_role, "AwsSolutions-IAM5[Resource::*]",
                    "Auto Scaling's and EC2's Describe calls support no resource-level permissions (Service "
                    "Authorization Reference); the scaling actions are limited by tag to this cluster's groups.")
        for resource in (autoscaler.scaling_resource(stack), autoscaler.nodegroup_resource(stack, spec.name)):
            acknowledge(self.autoscaler_role, f"AwsSolutions-IAM5[Resource::{nag_resource(stack, resource)}]",
                        "The node groups' Auto Scaling groups and node group ids are named by EKS at creation; the "
                        "scaling actions require this cluster's auto-discovery tags on the group.")
        identity = pod_identity.associate(
            self, "AutoscalerPodIdentity", cluster_name=self.cluster.cluster_name, namespace=autoscaler.NAMESPACE,
            service_account=autoscaler.SERVICE_ACCOUNT, role=self.autoscaler_role)
        self.objects.chart("cluster-autoscaler", namespace=autoscaler.NAMESPACE, after=[
            self.nodes.managed[SYSTEM_GROUP], identity, self.control_plane.addons["eks-pod-identity-agent"]],
            values=autoscaler.chart_values(cluster_name=spec.name, region=spec.region,
                                           kubernetes_version=EksOrchestrator.of(spec).eks.kubernetes_version,
                                           system_selector={labels.GROUP: SYSTEM_GROUP}))

    @property
    def node_groups(self) -> Dict[str, Ec2NodeGroup]:
        return self.nodes.node_groups

    @property
    def grantee(self) -> iam.IGrantable:
        return self.workload_role

    def _addons(self, context: OrchestrationContext) -> None:
        version = EksOrchestrator.of(context.spec).eks.kubernetes_version
        add_standard_addons(self.control_plane, kubernetes_version=version, mounts=context.mounts)
        self.control_plane.add_addon("eks-node-monitoring-agent", kubernetes_version=version)

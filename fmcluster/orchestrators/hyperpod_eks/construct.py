"""SageMaker HyperPod on EKS, composed from the spec, in the order CloudFormation must create it:

1. the EKS control plane and its add-ons (the eks kind's `EksControlPlane`), the task-governance add-on among them;
2. HyperPod's dependency Helm chart (`GitHelmChart`, from its repository at the pinned commit);
3. the instance role, the lifecycle bucket with one OnCreate entry per instance group, and the
   AWS::SageMaker::Cluster (Orchestrator.Eks), which depends on 1 and 2;
4. the training operator add-on when asked for (it needs the HyperPod cluster), then task governance: its add-on,
   the cluster policy and the teams' compute quotas (they name the HyperPod cluster);
5. in the cluster: the node gate, the exporters, the teams' volumes and the Deployment that creates what fmcluster
   puts into the namespaces task governance creates for the quotas (the teams' claims, the checkpoint service
   account), whenever they appear (fmcluster never owns those namespaces, and the stack never waits for them), and
   the AMP managed scraper (the eks kind's).

docs/hyperpod-eks.md explains each piece and its sources."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, cast

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IConstruct

from fmcluster.nag import acknowledge
from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.orchestrators.hyperpod_eks import autoscaling, checkpoint_access, governance, nodes, team_volumes
from fmcluster.orchestrators.hyperpod_eks.cluster import HyperPodEksCluster
from fmcluster.orchestrators.hyperpod_eks.dependencies import GitHelmChart
from fmcluster.orchestrators.hyperpod_eks.irsa import IrsaCsiDrivers, oidc_provider
from fmcluster.orchestrators.hyperpod_eks.settings import SYSTEM_GROUP, HyperPodEksOrchestrator
from fmcluster.orchestrators.hyperpod_eks.versions import (
    ADDONS,
    HYPERPOD_CHART,
    HYPERPOD_NAMESPACE,
    IRSA_ADDONS,
    S3_CSI,
    TASK_GOVERNANCE,
    TRAINING_OPERATOR,
    TRAINING_OPERATOR_POLICY,
    TRAINING_OPERATOR_SERVICE_ACCOUNT,
)
from fmcluster.platforms.hyperpod.access import ssm_target
from fmcluster.platforms.hyperpod.instance_role import HyperPodInstanceRole, security_group_id, subnet_id
from fmcluster.platforms.hyperpod.lifecycle import LifecycleScripts
from fmcluster.platforms.kubernetes import gate, kuberay, labels, metrics, team_objects, volumes
from fmcluster.platforms.kubernetes.access import tunnel_command
from fmcluster.platforms.kubernetes.charts import ClusterObjects
from fmcluster.platforms.kubernetes.control_plane import add_standard_addons, build_control_plane
from fmcluster.platforms.kubernetes.scraper import ManagedScraper

# What the VPC CNI does on a node's ENI through the node's role, beyond the ENI actions of the hyperpod kind's role:
# assign and release pods' secondary IPs, set the ENI's attributes (AWS's HyperPod EKS execution role, aws-samples/
# awsome-distributed-training 1.architectures/7.sagemaker-hyperpod-eks/cfn-templates/nested-stacks/
# sagemaker-iam-role-stack.yaml). Resource types per action: the Service Authorization Reference for Amazon EC2.
CNI_IP_ACTIONS = ("ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses")
CNI_MODIFY_ACTION = "ec2:ModifyNetworkInterfaceAttribute"
# The add-on policy ECR pulls need on a node role (EKS user guide, "Amazon EKS node IAM role"); HyperPod's nodes pull
# the EKS add-ons' and HyperPod's agents' images from ECR with their execution role.
ECR_PULL_POLICY = "AmazonEC2ContainerRegistryPullOnly"


class HyperPodEksOrchestration(Construct):
    """Exposes ``control_plane``, ``cluster`` (eks.Cluster), ``dependencies`` (the chart), ``role``, ``lifecycle``,
    ``hyperpod`` (`HyperPodEksCluster`), ``governance``, ``objects`` and ``grantee`` (the instance role)."""

    def __init__(self, scope: Construct, id: str, *, context: OrchestrationContext) -> None:
        super().__init__(scope, id)
        spec = context.spec
        s = HyperPodEksOrchestrator.of(spec)
        self.control_plane = build_control_plane(
            self, cluster_name=spec.name, vpc=context.vpc, node_subnet=context.subnets[0],
            extra_subnets=context.extra_subnets, security_group=context.security_groups[0], settings=s.eks,
            addon_pins=ADDONS)
        private = context.subnets[:1] + context.extra_subnets
        self.cluster = self.control_plane.cluster
        self._addons(context)
        self.dependencies = GitHelmChart(
            self,
            "Dependencies",
            cluster=self.control_plane.icluster,
            kubectl_layer=self._layer(),
            source=HYPERPOD_CHART,
            values=nodes.chart_values(spec),
            namespaces=nodes.chart_namespaces(spec),
            vpc=self.cluster.vpc,
            subnets=private,
            security_groups=context.security_groups[:1],
        )
        self.role = self._instance_role(context)
        elastic = autoscaling.elastic_groups(spec)
        self.autoscaling_role = autoscaling.AutoscalingRole(self, "Autoscaling", cluster_name=spec.name) \
            if elastic else None
        self.lifecycle = LifecycleScripts(
            self,
            "Lifecycle",
            cluster_name=spec.name,
            parameters=nodes.lifecycle_parameters(spec, spec.region, context.mounts,
                                                  observability=context.metrics_workspace_arn is not None),
            profiles={g.name: nodes.node_profile(spec, g).to_json(indent=None) for g in spec.node_groups},
            entries={nodes.entry_script(n): n for n in nodes.group_names(spec)},
            hook="OnCreate",
        )
        self.hyperpod = HyperPodEksCluster(
            self,
            "Cluster",
            cluster_name=spec.name,
            eks_cluster_arn=self.cluster.cluster_arn,
            instance_groups=nodes.instance_groups(spec),
            role=self.role,
            lifecycle=self.lifecycle,
            subnets=context.subnets[:1],
            security_groups=context.security_groups,
            node_recovery=s.hyperpod.node_recovery,
            autoscaling_role_arn=self.autoscaling_role.role_arn if self.autoscaling_role else None,
            # the training operator's managed policy acts on HyperPod clusters tagged so (unverified: docs/hyperpod-eks.md)
            tags={"SageMaker": "true"} if s.hyperpod.training_operator else None,
            checkpoint_memory_percent=spec.checkpoints.memory_percent
            if spec.checkpoints is not None and spec.checkpoints.tier == "managed" else None,
        )
        # HyperPod's prerequisites: the dependency chart, the VPC CNI and the other standard add-ons are in place
        # before the HyperPod cluster exists. Task governance comes after it (below): its Kueue's Pod and Deployment
        # webhooks fail closed outside kube-system and kueue-system, so with no node to run them every Deployment
        # the chart and our manifests create would be refused (docs/hyperpod-eks.md, "Order of creation").
        for before in self.before_cluster:
            self.hyperpod.cluster.node.add_dependency(before)
        task_governance = self.control_plane.addons[TASK_GOVERNANCE]
        task_governance.node.add_dependency(self.hyperpod.cluster, self.dependencies.resource)
        tg = s.task_governance
        self.governance = governance.TaskGovernanceObjects(
            self,
            "TaskGovernance",
            name=f"{spec.name}-policy",
            cluster_arn=self.hyperpod.cluster_arn,
            scheduler=governance.scheduler_config(tg),
            quotas={t.name: governance.compute_quota(spec, t, self.hyperpod.cluster_arn, tags=context.instance_tags)
                    for t in tg.teams},
        )
        # the scheduler config and the quotas act through the add-on's Kueue
        self.governance.policy.node.add_dependency(task_governance)
        if s.hyperpod.training_operator:
            # Created before task governance, never after it: its Deployment goes into aws-hyperpod, which Kueue's
            # fail-closed Deployment and Pod webhooks cover, and under Continuous provisioning CloudFormation ends the
            # HyperPod cluster once its cluster-level resources are ready, before any node may run Kueue's webhook
            # server (docs/hyperpod-eks.md, "What is built, in order").
            operator = self.control_plane.add_addon(
                TRAINING_OPERATOR, kubernetes_version=s.eks.kubernetes_version,
                service_account=TRAINING_OPERATOR_SERVICE_ACCOUNT, managed_policies=[TRAINING_OPERATOR_POLICY],
                after=["eks-pod-identity-agent"])
            operator.node.add_dependency(self.hyperpod.cluster, self.dependencies.resource)
            task_governance.node.add_dependency(operator)
        # managed tiered checkpointing: the training pods' Pod Identity role (docs/checkpoints.md)
        self.checkpoint_access = checkpoint_access.for_spec(self, context=context, control_plane=self.control_plane,
                                                             cluster_name=self.cluster.cluster_name)
        self.objects = ClusterObjects(self, "Objects", cluster=self.control_plane.icluster)
        irsa_drivers = [(a, p) for a, p in context.mounts.csi_addons() if a.name in IRSA_ADDONS]
        oidc, issuer = oidc_provider(self, self.control_plane) if spec.serving is not None or irsa_drivers else (None, "")
        if spec.serving is not None:  # the HyperPod Inference Operator's add-on and the models (docs/serving.md)
            from fmcluster.orchestrators.hyperpod_eks.serving_install import ServingInstall

            self.serving = ServingInstall(
                self, "Serving", spec=spec, control_plane=self.control_plane, objects=self.objects,
                hyperpod_cluster_arn=self.hyperpod.cluster_arn, workspace_arn=context.metrics_workspace_arn,
                mounts=context.mounts, oidc=cast(iam.OidcProviderNative, oidc), issuer=issuer,
                after=[self.dependencies.resource],  # the add-on's configuration reads the cluster's ARN: it waits for it
                driver_permissions=next((p for a, p in irsa_drivers if a.name == S3_CSI), ()))
            # its Deployments go outside kube-system: created before task governance's fail-closed webhooks
            task_governance.node.add_dependency(self.serving.addon)
            irsa_drivers = [(a, p) for a, p in irsa_drivers if a.name != S3_CSI]
        if irsa_drivers:  # the stores' drivers on IRSA that serving did not install (one role and add-on each)
            IrsaCsiDrivers(self, "CsiDrivers", control_plane=self.control_plane,
                           kubernetes_version=s.eks.kubernetes_version, provider=cast(iam.OidcProviderNative, oidc),
                           issuer=issuer, drivers=irsa_drivers)
        if elastic:
            # Karpenter's kinds exist once HyperPod runs it for the cluster: the objects wait for its autoscaling to be
            # InService, which it reports apart from the cluster (docs/resilience.md)
            self.autoscaling_ready = autoscaling.AutoscalingReady(
                self, "AutoscalingReady", cluster_name=spec.name, cluster_arn=self.hyperpod.cluster_arn)
            self.autoscaling_ready.resource.node.add_dependency(self.hyperpod.cluster)
            self.objects.manifest("Karpenter", autoscaling.karpenter_objects(spec),
                                  after=[self.autoscaling_ready.resource])
        # our Deployments and DaemonSets outside the teams' namespaces go in before Kueue's webhooks exist
        for workload in self._install(context):
            task_governance.node.add_dependency(workload)
        stack = Stack.of(self)
        CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        CfnOutput(self, "HyperPodClusterArn", value=self.hyperpod.cluster_arn)
        CfnOutput(self, "KubeconfigCommand", value=f"aws eks update-kubeconfig --region {stack.region} "
                  f"--name {spec.name}")
        host = Fn.select(2, Fn.split("/", self.cluster.cluster_endpoint))  # https://<host>
        CfnOutput(self, "ApiEndpointHost", value=host)
        if not s.eks.endpoint.public:
            cluster_id = Fn.select(1, Fn.split("/", self.hyperpod.cluster_arn))  # arn:...:cluster/<id>
            node = ssm_target(region=spec.region, cluster=spec.name, group=SYSTEM_GROUP, cluster_id=cluster_id)
            CfnOutput(self, "ApiTunnelCommand", value=tunnel_command(region=spec.region, target=node, endpoint_host=host),
                      description="Forwards localhost:8443 to the private API endpoint through a HyperPod system node; "
                      "then KubeconfigCommand and: kubectl config set-cluster <cluster ARN> "
                      "--server=https://127.0.0.1:8443 --tls-server-name=<ApiEndpointHost>")

    @property
    def grantee(self) -> iam.IGrantable:
        return self.role

    @property
    def before_cluster(self) -> List[IConstruct]:
        """What the HyperPod cluster waits for: the dependency chart and every add-on but the training operator and
        task governance (both need the HyperPod cluster)."""
        return [self.dependencies.resource,
                *(a for name, a in self.control_plane.addons.items() if name not in (TRAINING_OPERATOR, TASK_GOVERNANCE))]

    def _layer(self) -> lambda_.ILayerVersion:
        return cast(lambda_.ILayerVersion, self.control_plane.kubectl_layer)

    def _addons(self, context: OrchestrationContext) -> None:
        """The eks kind's add-ons (CloudFormation completes an add-on that has no nodes to run on yet as DEGRADED,
        docs/hyperpod-eks.md) and task governance; no EKS node monitoring agent (HyperPod's agent watches its nodes)."""
        version = HyperPodEksOrchestrator.of(context.spec).eks.kubernetes_version
        add_standard_addons(self.control_plane, kubernetes_version=version, mounts=context.mounts,
                            installed_by_kind=IRSA_ADDONS)
        self.control_plane.add_addon(TASK_GOVERNANCE, kubernetes_version=version)

    def _instance_role(self, context: OrchestrationContext) -> HyperPodInstanceRole:
        """The hyperpod kind's instance role, plus what an EKS node does with it: pull images from ECR (kubelet) and
        hand out Pod Identity credentials (the Pod Identity agent on the node calls eks-auth on this cluster)."""
        spec = context.spec
        role = HyperPodInstanceRole(self, "InstanceRole", cluster_name=spec.name, subnets=context.subnets[:1],
                                    security_groups=context.security_groups,
                                    description=f"fmcluster HyperPod nodes of {spec.name} (EKS)")
        role.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(ECR_PULL_POLICY))
        acknowledge(role.role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{ECR_PULL_POLICY}]",
                    "HyperPod EKS nodes pull the EKS add-ons' and HyperPod agents' images from ECR (pull only, the "
                    "policy EKS documents for node roles).")
        role.add_to_policy(iam.PolicyStatement(sid="PodIdentity", actions=["eks-auth:AssumeRoleForPodIdentity"],
                                               resources=[self.cluster.cluster_arn]))
        # The VPC CNI's IP management on the node's ENI, as AWS's HyperPod EKS execution role grants it (on "*" there);
        # here limited to the resource types the Service Authorization Reference lists for each action: ENIs in this
        # account and Region for Assign/UnassignPrivateIpAddresses; for ModifyNetworkInterfaceAttribute also the
        # cluster's security groups and node subnet, and the instance, which runs in a SageMaker-owned account.
        stack = Stack.of(self)

        def arn(resource: str, account: Optional[str] = None) -> str:
            return f"arn:{stack.partition}:ec2:{stack.region}:{stack.account if account is None else account}:{resource}"

        eni = arn("network-interface/*")
        role.add_to_policy(iam.PolicyStatement(
            sid="VpcCniPrivateIps", actions=list(CNI_IP_ACTIONS), resources=[eni]))
        role.add_to_policy(iam.PolicyStatement(
            sid="VpcCniModifyEni", actions=[CNI_MODIFY_ACTION],
            resources=[eni, *(arn(f"security-group/{security_group_id(g)}") for g in context.security_groups),
                       *(arn(f"subnet/{subnet_id(n)}") for n in context.subnets[:1]), arn("instance/*", "*")]))
        return role

    def _install(self, context: OrchestrationContext) -> List[IConstruct]:
        """The node gate, the exporters and the scraper; each team's volume, and the Deployment that creates each
        team's claim of the shared file system and checkpoint service account. Returns the manifests with workloads in
        fmcluster's own namespace (task governance's add-on waits for them)."""
        spec = context.spec
        objects = self.objects
        after_gate: List[IConstruct] = []
        workloads: List[IConstruct] = []
        if nodes.gated(spec):
            after_gate.append(objects.manifest("NodeGate", gate.objects(
                groups=[g.name for g in spec.node_groups], policy=spec.validation_policy,
                tolerations=[nodes.HEALTH_TOLERATION], adopt=True)))
            workloads += after_gate
        if context.metrics_workspace_arn is not None:
            workloads.append(objects.manifest("Exporters", metrics.exporter_objects(
                system_selector={labels.GROUP: SYSTEM_GROUP},
                gpu_instance_types=[g.instance_type for g in spec.node_groups if g.instance.is_gpu],
                node_labels=nodes.HEALTH_LABELS, tolerations=[nodes.HEALTH_TOLERATION]),
                after=after_gate or [self.objects_namespace()]))
            self.scraper = ManagedScraper(
                self, "Scraper", alias=f"fmcluster-{spec.name}", cluster_arn=self.cluster.cluster_arn,
                subnets=context.subnets[:1] + context.extra_subnets, security_groups=context.security_groups[:1],
                workspace_arn=context.metrics_workspace_arn,
                config=metrics.scrape_config(cluster=spec.name, interval_s=spec.observability.scrape_interval_seconds,
                                             strip_ml_prefix=True,
                                             serving_namespace=spec.serving.namespace if spec.serving else None))
        # What goes into the namespaces task governance creates for the teams' quotas, whenever it does: the volumes
        # now, the claims and the checkpoint service accounts from a Deployment in our namespace that waits for the
        # namespaces (the stack never waits for them; docs/hyperpod-eks.md, "The teams' namespaces").
        wanted: List[Dict[str, Any]] = []
        teams = {t.name: t.namespace for t in HyperPodEksOrchestrator.of(spec).task_governance.teams}
        for mount, volume in context.mounts.volumes():
            wanted += team_volumes.install(
                objects, mount_id=mount.id,
                per_team=team_volumes.team_volumes(cluster=spec.name, teams=teams, volume=volume),
                after=[self.control_plane.addons[volume.addon]])
        wanted += checkpoint_access.service_accounts(spec)
        # Ray's operator on the system nodes, in before task governance's Kueue webhooks (docs/post-training.md)
        workloads.append(objects.chart(
            "kuberay-operator", namespace=kuberay.NAMESPACE, release=kuberay.RELEASE,
            values=kuberay.chart_values(system_selector={labels.GROUP: SYSTEM_GROUP})))
        if wanted:
            workloads.append(objects.manifest("TeamObjects", team_objects.objects(
                namespace=gate.NAMESPACE, wanted=wanted, node_selector={labels.GROUP: SYSTEM_GROUP}),
                after=after_gate or [self.objects_namespace()]))
        return workloads

    def objects_namespace(self) -> IConstruct:
        """fmcluster's namespace (for the exporters and the team-objects Deployment), when the node gate (which creates it) is
        not installed; one manifest, however often asked."""
        return self.objects.manifests.get("SystemNamespace") or \
            self.objects.manifest("SystemNamespace", [volumes.namespace(gate.NAMESPACE)])


# re-exported for the tests and docs: where HyperPod's agents run
__all__ = ["HyperPodEksOrchestration", "HYPERPOD_NAMESPACE"]

"""The EKS control plane (aws_cdk.aws_eks_v2): API authentication with access entries for the spec's admins only, a
private endpoint unless the spec lists public CIDRs, secrets encrypted with a customer managed key, every control
plane log type to an encrypted log group, control-plane ENIs in the node subnet and a second AZ; and the EKS add-ons.
"""

from __future__ import annotations

import importlib
from typing import Dict, Mapping, Optional, Sequence, cast

from aws_cdk import CfnCondition, RemovalPolicy, Size, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.aws_lambda import CfnFunction
from constructs import Construct

from fmcluster.constructs.kms import ClusterKey, logs_key_conditions
from fmcluster.nag import acknowledge, cfn_lint_ignore
from fmcluster.platforms.kubernetes.versions import ADDONS, KUBECTL_LAYERS, KUBERNETES_VERSIONS, AddonPin

LOG_TYPES = (eks.ClusterLoggingTypes.API, eks.ClusterLoggingTypes.AUDIT, eks.ClusterLoggingTypes.AUTHENTICATOR,
             eks.ClusterLoggingTypes.CONTROLLER_MANAGER, eks.ClusterLoggingTypes.SCHEDULER)
# AWS managed access policy for cluster administrators (EKS user guide, "Access policy permissions").
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
# VPC CNI: keep few spare pod addresses per node (its default keeps a whole spare ENI's worth: 49 on a p5 node),
# so the node subnet holds the pods (POD_ADDRESSES_PER_NODE in addresses.py). amazon-vpc-cni-k8s README, WARM_IP_TARGET.
VPC_CNI_ENV = {"WARM_IP_TARGET": "4", "MINIMUM_IP_TARGET": "16"}


def known_zones(subnets: Sequence[ec2.ISubnet]) -> Optional[set]:
    """The subnets' AZs, or None when one was imported by id alone (existing VPCs' extra subnets): then EKS itself
    checks the two-AZ rule at deploy time."""
    try:
        return {s.availability_zone for s in subnets}
    except RuntimeError:
        return None


def kubectl_layer(scope: Construct, kubernetes_version: str) -> object:
    """The kubectl/Helm Lambda layer from the PyPI package of the cluster's Kubernetes version."""
    if kubernetes_version not in KUBECTL_LAYERS:
        raise ValueError(f"kubernetes_version: {kubernetes_version!r} is not one of {', '.join(KUBERNETES_VERSIONS)}")
    module, name = KUBECTL_LAYERS[kubernetes_version]
    return getattr(importlib.import_module(module), name)(scope, "KubectlLayer")


class EksControlPlane(Construct):
    """An EKS cluster without default capacity (managed node groups are added beside it).

    :param cluster_name: the EKS cluster's name (also its log group's).
    :param kubernetes_version: ``1.33`` .. ``1.35``.
    :param vpc: the cluster's VPC.
    :param subnets: control-plane subnets, in at least two AZs; the kubectl handler runs in them (they need egress).
    :param security_group: the control plane's additional security group (the nodes' EFA group).
    :param admins: IAM principal ARNs given cluster-admin access entries.
    :param public_access_cidrs: CIDRs of a public endpoint; empty: private endpoint only.
    :param log_retention: retention of the control-plane log group.
    :param addon_pins: the add-ons `add_addon` may install, with their pinned versions (default: the eks kind's).

    Exposes ``cluster`` (eks.Cluster), ``secrets_key``, ``log_group``, ``addons`` (name -> eks.Addon), ``kubectl_layer``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        kubernetes_version: str,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        admins: Sequence[str],
        public_access_cidrs: Sequence[str] = (),
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        addon_pins: Optional[Mapping[str, AddonPin]] = None,
    ) -> None:
        super().__init__(scope, id)
        self.addon_pins: Mapping[str, AddonPin] = ADDONS if addon_pins is None else addon_pins
        zones = known_zones(subnets)
        if len(subnets) < 2 or (zones is not None and len(zones) < 2):
            raise ValueError("subnets: EKS needs control-plane subnets in at least two availability zones")
        if not admins:
            raise ValueError("admins: at least one principal, or nobody can use the cluster")
        stack = Stack.of(self)
        self.secrets_key = ClusterKey(self, "SecretsKey", description=f"{cluster_name}: EKS secrets envelope encryption")
        logs_key = ClusterKey(self, "LogsKey", description=f"{cluster_name}: EKS control plane logs",
                              service_principals={f"logs.{stack.region}.amazonaws.com":
                                                  logs_key_conditions(stack.region, stack.account)})
        # EKS writes to /aws/eks/<name>/cluster and creates it unencrypted unless it exists: create it first
        # (EKS user guide, "Send control plane logs to CloudWatch Logs").
        self.log_group = logs.LogGroup(self, "ControlPlaneLogs", log_group_name=f"/aws/eks/{cluster_name}/cluster",
                                       encryption_key=logs_key.key, retention=log_retention,
                                       removal_policy=RemovalPolicy.DESTROY)
        endpoint = (eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_access_cidrs) if public_access_cidrs
                    else eks.EndpointAccess.PRIVATE)
        # the kubectl/Helm layer, also for other functions that run helm or kubectl against this cluster
        self.kubectl_layer = kubectl_layer(self, kubernetes_version)
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=cluster_name,
            version=eks.KubernetesVersion.of(kubernetes_version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=list(subnets))],
            security_group=security_group,
            endpoint_access=endpoint,
            secrets_encryption_key=self.secrets_key.key,
            cluster_logging=list(LOG_TYPES),
            # managed node groups only (no Auto Mode, no default node group); EKS add-ons instead of the
            # self-managed vpc-cni/coredns/kube-proxy it would otherwise install
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            bootstrap_self_managed_addons=False,
            # access entries for the admins only; CloudFormation's role gets none
            bootstrap_cluster_creator_admin_permissions=False,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=self.kubectl_layer,  # type: ignore[arg-type]
                memory=Size.gibibytes(2),
            ),
        )
        self.cluster.node.add_dependency(self.log_group)
        self._acknowledge_kubectl_provider()
        acknowledge(self.cluster, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                    "AmazonEKSClusterPolicy]", "The EKS cluster role requires AmazonEKSClusterPolicy (EKS user guide, "
                    "'Amazon EKS cluster IAM role').")
        for i, principal in enumerate(admins):
            eks.AccessEntry(
                self,
                f"Admin{i + 1}",
                cluster=cast(eks.ICluster, self.cluster),
                principal=principal,
                access_policies=[eks.AccessPolicy.from_access_policy_name(
                    CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER)],
            )
        self.addons: Dict[str, eks.Addon] = {}

    @property
    def icluster(self) -> eks.ICluster:
        """The cluster as the construct interfaces take it (jsii's Cluster type lacks one protocol member)."""
        return cast(eks.ICluster, self.cluster)

    def _acknowledge_kubectl_provider(self) -> None:
        """CDK's kubectl provider (two Lambda functions applying manifests and Helm charts from CloudFormation)
        comes with its own roles; what cdk-nag finds there is CDK's design, acknowledged here with the reason."""
        provider = self.cluster.kubectl_provider
        if provider is None:
            raise ValueError("kubectl_provider_options: the cluster has no kubectl provider")
        stack = Stack.of(self)
        # the logical ids cdk-nag names: the handler function's and its ECR Public condition's (they follow the
        # construct path, so they differ between kinds)
        handler = next(c for c in provider.node.find_all() if isinstance(c, CfnFunction)
                       and c.node.scope is not None and c.node.scope.node.id == "Handler")
        condition = next(c for c in provider.node.find_all() if isinstance(c, CfnCondition))
        handler_id, condition_id = stack.get_logical_id(handler), stack.get_logical_id(condition)
        policy = "Policy::arn:<AWS::Partition>:iam::aws:policy/"
        reasons = {
            f"AwsSolutions-IAM4[{policy}service-role/AWSLambdaBasicExecutionRole]":
                "CDK's kubectl provider functions log to CloudWatch with the Lambda basic execution policy.",
            f"AwsSolutions-IAM4[{policy}service-role/AWSLambdaVPCAccessExecutionRole]":
                "The kubectl provider runs in the VPC to reach the private API endpoint: Lambda needs its documented "
                "VPC access policy to manage its ENIs.",
            f"AwsSolutions-IAM4[{policy}AmazonEC2ContainerRegistryReadOnly]":
                "CDK's kubectl handler reads Helm charts stored as OCI artifacts in ECR (read only).",
            f"AwsSolutions-IAM4[Policy::{{\"Fn::If\":[\"{condition_id}\","
            "{\"Fn::Join\":[\"\",[\"arn:\",{\"Ref\":\"AWS::Partition\"},\":iam::aws:policy/"
            "AmazonElasticContainerRegistryPublicReadOnly\"]]},{\"Ref\":\"AWS::NoValue\"}]}]":
                "CDK's kubectl handler adds ECR Public read only when a chart comes from public.ecr.aws (a condition).",
            "AwsSolutions-L1": "CDK pins the kubectl handler's Python runtime to the one its kubectl/Helm layer is "
                               "built for; it moves with aws-cdk-lib.",
        }
        for rule, reason in reasons.items():
            acknowledge(provider, rule, reason)
        acknowledge(provider, f"AwsSolutions-IAM5[Resource::<{handler_id}.Arn>:*]",
                    "CDK's custom resource framework may invoke every version of its own handler function only.")
        for child in provider.node.find_all():
            if isinstance(child, CfnFunction):
                cfn_lint_ignore(child, ["W3005"], "CDK's kubectl provider declares DependsOn on its role as well as a "
                                "GetAtt; harmless")

    def add_addon(
        self,
        name: str,
        *,
        kubernetes_version: str,
        configuration: Optional[Dict[str, object]] = None,
        service_account: Optional[str] = None,
        policies: Sequence[iam.PolicyStatement] = (),
        managed_policies: Sequence[str] = (),
        after: Sequence[str] = (),
        pin: Optional[AddonPin] = None,
    ) -> eks.Addon:
        """An EKS add-on at its pinned version (or EKS's default), with a Pod Identity role for `service_account`
        holding `policies` / `managed_policies`, created after the add-ons named in `after`. `pin`: the add-on's pins
        where the control plane's table has none (a store's CSI driver)."""
        pin = self.addon_pins.get(name, pin)
        if pin is None:
            raise ValueError(f"name: {name!r} is not a pinned add-on ({', '.join(self.addon_pins)})")
        addon = eks.Addon(
            self,
            "".join(p.capitalize() for p in name.split("-")),
            cluster=self.icluster,
            addon_name=name,
            addon_version=pin.version_for(kubernetes_version),
            configuration_values=configuration,
        )
        if service_account is not None:
            role = self.pod_identity_role(f"{addon.node.id}Role", name, policies, managed_policies)
            cfn = addon.node.default_child
            cfn.add_property_override(  # type: ignore[union-attr]
                "PodIdentityAssociations", [{"ServiceAccount": service_account, "RoleArn": role.role_arn}])
        for other in after:
            addon.node.add_dependency(self.addons[other])
        self.addons[name] = addon
        return addon

    def pod_identity_role(self, id: str, purpose: str, policies: Sequence[iam.PolicyStatement] = (),
                          managed_policies: Sequence[str] = ()) -> iam.Role:
        """A role EKS Pod Identity hands to pods of this account's clusters (EKS user guide, "Create a Pod Identity
        association": trust pods.eks.amazonaws.com with sts:AssumeRole and sts:TagSession)."""
        role = iam.Role(
            self,
            id,
            description=f"EKS Pod Identity: {purpose}",
            assumed_by=iam.PrincipalWithConditions(
                iam.ServicePrincipal("pods.eks.amazonaws.com").with_session_tags(),
                {"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            ),
        )
        for statement in policies:
            role.add_to_policy(statement)
        for name in managed_policies:
            role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(name))
            acknowledge(role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]",
                        f"{purpose}: the EKS user guide documents {name} as this add-on's policy (EKS user guide, "
                        "'IAM roles for Amazon EKS add-ons'); held by its Pod Identity role only, not by the nodes.")
        return role


"""The EKS control plane every Kubernetes kind runs on (eks, hyperpod-eks), and the add-ons each of them needs."""

from __future__ import annotations

from typing import Mapping, Optional

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.platforms.kubernetes.cluster import VPC_CNI_ENV, EksControlPlane
from fmcluster.platforms.kubernetes.settings import EksControlPlaneSettings
from fmcluster.platforms.kubernetes.versions import AddonPin
from fmcluster.platforms.storage import SharedFileSystem

# EKS user guide, "Amazon VPC CNI": the add-on's service account and the managed policy it documents for it.
VPC_CNI_SERVICE_ACCOUNT, VPC_CNI_POLICY = "aws-node", "AmazonEKS_CNI_Policy"
FSX_CSI_CONTROLLER_SERVICE_ACCOUNT = "fsx-csi-controller-sa"


def build_control_plane(scope: Construct, *, context: OrchestrationContext, settings: EksControlPlaneSettings,
                        addon_pins: Optional[Mapping[str, AddonPin]] = None) -> EksControlPlane:
    """The EKS control plane (id ``ControlPlane``) a Kubernetes kind runs on: in the node subnet and the kind's
    second-AZ subnets, with the nodes' EFA group, the spec's admins and endpoint."""
    if context.vpc is None:
        raise ValueError("context: an EKS cluster needs the VPC (context.vpc)")
    if not context.extra_subnets:
        raise ValueError("context: an EKS control plane needs a subnet in a second AZ (context.extra_subnets)")
    return EksControlPlane(
        scope,
        "ControlPlane",
        cluster_name=context.spec.name,
        kubernetes_version=settings.kubernetes_version,
        vpc=context.vpc,
        subnets=context.subnets[:1] + context.extra_subnets,
        security_group=context.security_groups[0],
        admins=settings.admins,
        public_access_cidrs=settings.endpoint.public_access_cidrs,
        addon_pins=addon_pins,
    )


def add_standard_addons(control_plane: EksControlPlane, *, kubernetes_version: str,
                        file_system: Optional[SharedFileSystem]) -> None:
    """The add-ons every EKS-orchestrated cluster here runs: Pod Identity, the VPC CNI on its own Pod Identity role,
    kube-proxy, CoreDNS and the FSx for Lustre CSI driver. The driver serves static volumes only (the storage stack
    owns the file system): its controller provisions nothing, so its role may only describe the file system (dynamic
    provisioning would need the driver's documented policy)."""
    cp, version = control_plane, kubernetes_version
    cp.add_addon("eks-pod-identity-agent", kubernetes_version=version)
    cp.add_addon("vpc-cni", kubernetes_version=version, configuration={"env": VPC_CNI_ENV},
                 service_account=VPC_CNI_SERVICE_ACCOUNT, managed_policies=[VPC_CNI_POLICY],
                 after=["eks-pod-identity-agent"])
    cp.add_addon("kube-proxy", kubernetes_version=version)
    cp.add_addon("coredns", kubernetes_version=version)
    statements = []
    if file_system is not None and file_system.file_system_id is not None:
        stack = Stack.of(cp)
        statements.append(iam.PolicyStatement(
            sid="DescribeTheClusterFileSystem", actions=["fsx:DescribeFileSystems"],
            resources=[f"arn:{stack.partition}:fsx:{stack.region}:{stack.account}:file-system/"
                       f"{file_system.file_system_id}"]))
    cp.add_addon("aws-fsx-csi-driver", kubernetes_version=version,
                 service_account=FSX_CSI_CONTROLLER_SERVICE_ACCOUNT, policies=statements,
                 after=["eks-pod-identity-agent"])

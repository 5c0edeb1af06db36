"""The EKS control plane every Kubernetes kind runs on (eks, hyperpod-eks), and the add-ons each of them needs."""

from __future__ import annotations

from typing import Collection, Mapping, Optional, Sequence

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.nag import acknowledge_wildcards
from fmcluster.platforms.kubernetes.cluster import VPC_CNI_ENV, EksControlPlane
from fmcluster.platforms.kubernetes.settings import EksControlPlaneSettings
from fmcluster.platforms.kubernetes.versions import AddonPin
from fmcluster.platforms.storage import Mounts

# EKS user guide, "Amazon VPC CNI": the add-on's service account and the managed policy it documents for it.
VPC_CNI_SERVICE_ACCOUNT, VPC_CNI_POLICY = "aws-node", "AmazonEKS_CNI_Policy"


def build_control_plane(scope: Construct, *, cluster_name: str, vpc: Optional[ec2.IVpc], node_subnet: ec2.ISubnet,
                        extra_subnets: Sequence[ec2.ISubnet], security_group: ec2.ISecurityGroup,
                        settings: EksControlPlaneSettings,
                        addon_pins: Optional[Mapping[str, AddonPin]] = None) -> EksControlPlane:
    """The EKS control plane (id ``ControlPlane``) a Kubernetes kind runs on: in the node subnet and the kind's
    second-AZ subnets (``OrchestrationContext.extra_subnets``), with the nodes' EFA group, the spec's admins and
    endpoint."""
    if vpc is None:
        raise ValueError("vpc: an EKS cluster needs the VPC (context.vpc)")
    if not extra_subnets:
        raise ValueError("extra_subnets: an EKS control plane needs a subnet in a second AZ (context.extra_subnets)")
    return EksControlPlane(
        scope,
        "ControlPlane",
        cluster_name=cluster_name,
        kubernetes_version=settings.kubernetes_version,
        vpc=vpc,
        subnets=[node_subnet, *extra_subnets],
        security_group=security_group,
        admins=settings.admins,
        public_access_cidrs=settings.endpoint.public_access_cidrs,
        addon_pins=addon_pins,
    )


def add_standard_addons(control_plane: EksControlPlane, *, kubernetes_version: str, mounts: Mounts,
                        installed_by_kind: Collection[str] = ()) -> None:
    """The add-ons every EKS-orchestrated cluster here runs: Pod Identity, the VPC CNI on its own Pod Identity role,
    kube-proxy, CoreDNS, and the shared stores' CSI drivers (`Mounts.csi_addons`), each on a Pod Identity role with
    what its volumes say the driver needs, but those `installed_by_kind` (a kind whose pin of the add-on reads
    another identity installs them itself)."""
    cp, version = control_plane, kubernetes_version
    cp.add_addon("eks-pod-identity-agent", kubernetes_version=version)
    cp.add_addon("vpc-cni", kubernetes_version=version, configuration={"env": VPC_CNI_ENV},
                 service_account=VPC_CNI_SERVICE_ACCOUNT, managed_policies=[VPC_CNI_POLICY],
                 after=["eks-pod-identity-agent"])
    cp.add_addon("kube-proxy", kubernetes_version=version)
    cp.add_addon("coredns", kubernetes_version=version)
    stack = Stack.of(cp)
    for addon, permissions in mounts.csi_addons():
        if addon.name in installed_by_kind:
            continue
        arns = [p.arns(partition=stack.partition, region=stack.region, account=stack.account) for p in permissions]
        statements = [iam.PolicyStatement(sid=p.sid, actions=list(p.actions), resources=resources,
                                          conditions=dict(p.conditions) or None)
                      for p, resources in zip(permissions, arns)]
        installed = cp.add_addon(addon.name, kubernetes_version=version, service_account=addon.service_account,
                                 policies=statements, after=["eks-pod-identity-agent"],
                                 pin=AddonPin(addon.name, dict(addon.versions), addon.source))
        for p, resources in zip(permissions, arns):
            acknowledge_wildcards(installed.node.scope, resources, p.why)

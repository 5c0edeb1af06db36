"""Roles for service accounts through the cluster's OIDC provider (IRSA), for what takes no Pod Identity here: the
HyperPod Inference Operator's add-on (its roles, as AWS's script creates them) and an add-on whose pinned version
reads IRSA only (`versions.IRSA_ADDONS`). A store's CSI driver of that kind gets one role on one add-on, with
serving's model reads where serving streams weights from S3 (serving_install.py), else from `IrsaCsiDrivers`."""

from __future__ import annotations

from typing import Sequence, Tuple

from aws_cdk import CfnJson, Fn, Stack
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.logical_ids import pin_logical_id
from fmcluster.constructs.store_permissions import grant_permissions
from fmcluster.platforms.kubernetes.cluster import EksControlPlane
from fmcluster.platforms.storage import CsiAddon
from fmcluster.platforms.storage.forms import Permission

# The provider's logical id, whoever needs it (serving, a store's driver): serving created it first under this id, and
# IAM refuses a second provider for the same URL, so a provider that moved to another id when serving or a store came
# or went would be created before the old one is deleted and fail the deploy.
OIDC_LOGICAL_ID = "HyperPodEksServingOidc78810FB5"


def oidc_provider(scope: Construct, control_plane: EksControlPlane) -> Tuple[iam.OidcProviderNative, str]:
    """The cluster's OIDC provider (id ``Oidc`` in `scope`, its logical id pinned) and its issuer without https://.
    One per cluster: build it once and hand it to every role that needs it."""
    url = control_plane.cluster.cluster_open_id_connect_issuer_url
    provider = iam.OidcProviderNative(scope, "Oidc", url=url, client_ids=["sts.amazonaws.com"])
    pin_logical_id(provider, OIDC_LOGICAL_ID)
    return provider, Fn.select(1, Fn.split("https://", url))


def irsa_role(scope: Construct, id: str, *, provider: iam.OidcProviderNative, issuer: str, namespace: str,
              service_account: str, purpose: str, sagemaker: bool = False) -> iam.Role:
    """A role for one service account (IRSA); also assumable by SageMaker where AWS's script trusts it."""
    conditions = CfnJson(scope, f"{id}Trust", value={f"{issuer}:sub": f"system:serviceaccount:{namespace}:"
                                                                       f"{service_account}",
                                                      f"{issuer}:aud": "sts.amazonaws.com"})
    principal: iam.IPrincipal = iam.WebIdentityPrincipal(provider.oidc_provider_arn, {"StringEquals": conditions})
    if sagemaker:
        principal = iam.CompositePrincipal(principal, iam.ServicePrincipal("sagemaker.amazonaws.com"))
    return iam.Role(scope, id, assumed_by=principal, description=f"IRSA: {purpose} ({namespace}/{service_account})")


def install_addon(control_plane: EksControlPlane, name: str, role: iam.Role, *, kubernetes_version: str) -> eks.Addon:
    """The add-on at its pin, its service account on `role` (the add-on's ServiceAccountRoleArn)."""
    addon = control_plane.add_addon(name, kubernetes_version=kubernetes_version)
    addon.node.default_child.add_property_override(  # type: ignore[union-attr]
        "ServiceAccountRoleArn", role.role_arn)
    return addon


class IrsaCsiDrivers(Construct):
    """The stores' CSI drivers whose pinned add-on reads IRSA only, on a cluster without serving: per add-on one role
    with what its volumes need (`Mounts.csi_addons`), trusted through the cluster's OIDC `provider`. Exposes
    ``addons`` by name."""

    def __init__(self, scope: Construct, id: str, *, control_plane: EksControlPlane, kubernetes_version: str,
                 provider: iam.OidcProviderNative, issuer: str,
                 drivers: Sequence[Tuple[CsiAddon, Sequence[Permission]]]) -> None:
        super().__init__(scope, id)
        self.addons = {}
        for addon, permissions in drivers:
            rid = "".join(p.capitalize() for p in addon.name.split("-")) + "Role"
            role = irsa_role(self, rid, provider=provider, issuer=issuer, namespace="kube-system",
                             service_account=addon.service_account, purpose=f"the {addon.name} add-on")
            grant_permissions(role, permissions, stack=Stack.of(self))
            self.addons[addon.name] = install_addon(control_plane, addon.name, role,
                                                    kubernetes_version=kubernetes_version)

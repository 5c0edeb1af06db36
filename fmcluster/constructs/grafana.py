"""Amazon Managed Grafana: a workspace signing in through IAM Identity Center, reading one AMP workspace."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.prometheus import PrometheusWorkspace

GRAFANA_VERSION = "10.4"


class GrafanaWorkspace(Construct):
    """A Managed Grafana workspace with a customer managed role that may only query `prometheus`.

    Sign-in is IAM Identity Center (AWS_SSO): assign users or groups to the workspace after deploy
    (``aws grafana update-permissions``), which CloudFormation cannot do. The role trusts the Grafana service
    for this account only.

    :param name: workspace name (shown in the console).
    :param prometheus: the AMP workspace the dashboards read.
    """

    def __init__(self, scope: Construct, id: str, *, name: str, prometheus: PrometheusWorkspace) -> None:
        super().__init__(scope, id)
        account = Stack.of(self).account
        self.role = iam.Role(
            self,
            "Role",
            description="Managed Grafana reads the cluster's AMP workspace",
            assumed_by=iam.ServicePrincipal(
                "grafana.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            ),
        )
        prometheus.grant_query(self.role)
        self.workspace = grafana.CfnWorkspace(
            self,
            "Workspace",
            name=name,
            description=f"{name}: dashboards for the cluster's AMP workspace",
            account_access_type="CURRENT_ACCOUNT",
            authentication_providers=["AWS_SSO"],
            permission_type="CUSTOMER_MANAGED",
            role_arn=self.role.role_arn,
            data_sources=["PROMETHEUS"],
            grafana_version=GRAFANA_VERSION,
        )
        # the role's policy must exist before Grafana first uses the role
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.workspace.node.add_dependency(policy)

    @property
    def endpoint(self) -> str:
        """The workspace URL host (``g-….grafana-workspace.<region>.amazonaws.com``)."""
        return self.workspace.attr_endpoint

"""An Amazon Managed Service for Prometheus managed scraper (AWS::APS::Scraper) for the EKS cluster: it discovers the
exporters through the Kubernetes API (its service-linked role gets an access entry and read-only RBAC from AMP itself
in API authentication mode) and writes to the observability stack's workspace.

AMP user guide, "Using an AWS managed collector": subnets in at least two AZs, the cluster's security group, the EKS
private endpoint on. The workspace is encrypted with a customer managed key, for which the guide has the scraper write
through a source role (trusted by the scraper service) and a target role (trusted by the source role, allowed to
remote-write), both in this account. https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html
"""

from __future__ import annotations

import base64
from typing import Any, Dict, Sequence

import yaml
from aws_cdk import Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.platforms.kubernetes.cluster import known_zones

SCRAPER_SERVICE = "scraper.aps.amazonaws.com"


class ManagedScraper(Construct):
    """A managed scraper of `cluster_arn` writing to `workspace_arn`.

    :param alias: the scraper's alias.
    :param cluster_arn: the EKS cluster.
    :param subnets: in at least two availability zones.
    :param security_groups: reaching the exporters (the nodes' group).
    :param workspace_arn: the AMP workspace.
    :param config: the Prometheus scrape configuration (kubernetes_sd_configs only).

    Exposes ``scraper`` (the CfnScraper), ``source_role`` and ``target_role``.
    """

    def __init__(self, scope: Construct, id: str, *, alias: str, cluster_arn: str, subnets: Sequence[ec2.ISubnet],
                 security_groups: Sequence[ec2.ISecurityGroup], workspace_arn: str, config: Dict[str, Any]) -> None:
        super().__init__(scope, id)
        zones = known_zones(subnets)
        if len(subnets) < 2 or (zones is not None and len(zones) < 2):
            raise ValueError("subnets: a managed scraper needs subnets in at least two availability zones")
        if any("static_configs" in job for job in config.get("scrape_configs", [])):
            raise ValueError("config: a managed scraper discovers targets with kubernetes_sd_configs only")
        stack = Stack.of(self)
        scrapers = f"arn:{stack.partition}:aps:{stack.region}:{stack.account}:scraper/*"
        # the scraper's ARN does not exist before the scraper: both trusts name this account's scrapers
        self.source_role = iam.Role(self, "SourceRole", description=f"AMP scraper of {alias}: assumes the target role",
                                    assumed_by=iam.PrincipalWithConditions(iam.ServicePrincipal(SCRAPER_SERVICE), {
                                        "StringEquals": {"aws:SourceAccount": stack.account},
                                        "ArnLike": {"aws:SourceArn": scrapers}}))
        self.target_role = iam.Role(self, "TargetRole", description=f"AMP scraper of {alias}: writes to the workspace",
                                    assumed_by=iam.PrincipalWithConditions(iam.ArnPrincipal(self.source_role.role_arn), {
                                        "StringLike": {"sts:ExternalId": scrapers}}))
        self.target_role.add_to_policy(iam.PolicyStatement(sid="RemoteWrite", actions=["aps:RemoteWrite"],
                                                           resources=[workspace_arn]))
        self.source_role.add_to_policy(iam.PolicyStatement(sid="AssumeTarget", actions=["sts:AssumeRole"],
                                                           resources=[self.target_role.role_arn]))
        blob = base64.b64encode(yaml.safe_dump(config, sort_keys=False).encode()).decode()
        self.scraper = aps.CfnScraper(
            self,
            "Resource",
            alias=alias,
            source=aps.CfnScraper.SourceProperty(eks_configuration=aps.CfnScraper.EksConfigurationProperty(
                cluster_arn=cluster_arn,
                subnet_ids=[s.subnet_id for s in subnets],
                security_group_ids=[g.security_group_id for g in security_groups],
            )),
            scrape_configuration=aps.CfnScraper.ScrapeConfigurationProperty(configuration_blob=blob),
            destination=aps.CfnScraper.DestinationProperty(
                amp_configuration=aps.CfnScraper.AmpConfigurationProperty(workspace_arn=workspace_arn)),
            role_configuration=aps.CfnScraper.RoleConfigurationProperty(
                source_role_arn=self.source_role.role_arn, target_role_arn=self.target_role.role_arn),
        )

    @property
    def scraper_arn(self) -> str:
        return self.scraper.attr_arn

    @staticmethod
    def decode(blob: str) -> Any:
        return yaml.safe_load(base64.b64decode(blob))


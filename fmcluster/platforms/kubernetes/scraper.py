"""An Amazon Managed Service for Prometheus managed scraper (AWS::APS::Scraper) for the EKS cluster: it discovers the
exporters through the Kubernetes API (its service-linked role gets an access entry and read-only RBAC from AMP itself
in API authentication mode) and writes to the observability stack's workspace.

AMP user guide, "Using an AWS managed collector": subnets in at least two AZs, the cluster's security group, the EKS
private endpoint on. https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html

No ``RoleConfiguration``: the API documents it for cross-account scraping only ("Use this structure to enable
cross-account access", API_RoleConfiguration); in one account the collector writes with AMP's service-linked role,
AWSServiceRoleForAmazonPrometheusScraper (AMP user guide, "Using service-linked roles"). The workspace's customer
managed key is AMP's to use (its grant at the workspace's creation): a writer needs aps:RemoteWrite only, as the other
kinds' nodes remote-write with no KMS permission. Unverified: no AWS page states that a managed collector writes into a
workspace encrypted with a customer managed key (docs/eks.md, "Observability").
"""

from __future__ import annotations

import base64
from typing import Any, Dict, Sequence

import yaml
from aws_cdk import aws_aps as aps
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from fmcluster.platforms.kubernetes.cluster import known_zones


class ManagedScraper(Construct):
    """A managed scraper of `cluster_arn` writing to `workspace_arn`.

    :param alias: the scraper's alias.
    :param cluster_arn: the EKS cluster.
    :param subnets: in at least two availability zones.
    :param security_groups: reaching the exporters (the nodes' group).
    :param workspace_arn: the AMP workspace.
    :param config: the Prometheus scrape configuration (kubernetes_sd_configs only).

    Exposes ``scraper`` (the CfnScraper).
    """

    def __init__(self, scope: Construct, id: str, *, alias: str, cluster_arn: str, subnets: Sequence[ec2.ISubnet],
                 security_groups: Sequence[ec2.ISecurityGroup], workspace_arn: str, config: Dict[str, Any]) -> None:
        super().__init__(scope, id)
        zones = known_zones(subnets)
        if len(subnets) < 2 or (zones is not None and len(zones) < 2):
            raise ValueError("subnets: a managed scraper needs subnets in at least two availability zones")
        if any("static_configs" in job for job in config.get("scrape_configs", [])):
            raise ValueError("config: a managed scraper discovers targets with kubernetes_sd_configs only")
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
        )

    @property
    def scraper_arn(self) -> str:
        return self.scraper.attr_arn

    @staticmethod
    def decode(blob: str) -> Any:
        return yaml.safe_load(base64.b64decode(blob))


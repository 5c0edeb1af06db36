"""Amazon Managed Service for Prometheus: an encrypted workspace with logging, rules and an alert manager."""

from __future__ import annotations

from typing import Optional

from aws_cdk import RemovalPolicy
from aws_cdk import aws_aps as aps
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

# What a node collector needs to send samples, and what a dashboard or query client needs to read them
# (AMP IAM permissions reference). Listed action by action: no wildcard actions anywhere in the project.
REMOTE_WRITE_ACTIONS = ("aps:RemoteWrite",)
QUERY_ACTIONS = ("aps:GetLabels", "aps:GetMetricMetadata", "aps:GetSeries", "aps:QueryMetrics")

DEFAULT_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS


class PrometheusWorkspace(Construct):
    """An AMP workspace encrypted with a customer managed key, logging rule and alert manager events to an
    encrypted CloudWatch log group, with one rule groups namespace and (optionally) an alert manager definition.

    :param alias: the workspace alias (shown in the console; not unique, not a physical name).
    :param encryption_key: customer managed key for the workspace and its log group; its policy must let
        CloudWatch Logs use it for this account's log groups.
    :param rules: the rules file (Prometheus rule groups YAML) for the namespace.
    :param rule_namespace: the namespace's name, default ``fmcluster``.
    :param alert_manager_definition: the AMP alert manager definition (``alertmanager_config: |`` YAML),
        default none.
    :param log_retention: retention of the workspace's log group, default three months.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        alias: str,
        encryption_key: kms.IKey,
        rules: str,
        rule_namespace: str = "fmcluster",
        alert_manager_definition: Optional[str] = None,
        log_retention: logs.RetentionDays = DEFAULT_LOG_RETENTION,
    ) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            encryption_key=encryption_key,
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.workspace = aps.CfnWorkspace(
            self,
            "Workspace",
            alias=alias,
            kms_key_arn=encryption_key.key_arn,
            # the LogGroup ARN already ends in ":*", the form AMP asks for
            logging_configuration=aps.CfnWorkspace.LoggingConfigurationProperty(
                log_group_arn=self.log_group.log_group_arn
            ),
            alert_manager_definition=alert_manager_definition,
        )
        self.rule_groups = aps.CfnRuleGroupsNamespace(
            self,
            "Rules",
            name=rule_namespace,
            workspace=self.workspace.attr_arn,
            data=rules,
        )

    @property
    def workspace_arn(self) -> str:
        return self.workspace.attr_arn

    @property
    def workspace_id(self) -> str:
        return self.workspace.attr_workspace_id

    @property
    def endpoint(self) -> str:
        """The workspace's Prometheus endpoint, ending in ``/``."""
        return self.workspace.attr_prometheus_endpoint

    @property
    def remote_write_url(self) -> str:
        return f"{self.endpoint}api/v1/remote_write"

    @property
    def query_url(self) -> str:
        """The Prometheus HTTP API base for queries (append ``/query`` or ``/query_range``)."""
        return f"{self.endpoint}api/v1"

    def grant_remote_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """aps:RemoteWrite on this workspace only."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(REMOTE_WRITE_ACTIONS), resource_arns=[self.workspace_arn]
        )

    def grant_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read access (query, series, labels, metadata) on this workspace only."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(QUERY_ACTIONS), resource_arns=[self.workspace_arn]
        )

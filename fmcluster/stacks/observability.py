"""`<name>-observability`: AMP workspace, alert rules, alert manager → SNS, optional Managed Grafana."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from fmcluster import observability
from fmcluster.constructs.grafana import GrafanaWorkspace
from fmcluster.constructs.kms import ClusterKey, logs_key_conditions
from fmcluster.constructs.prometheus import PrometheusWorkspace
from fmcluster.observability.inventory import ExpectedNodes
from fmcluster.platforms.storage.forms import Alarm
from fmcluster.spec import ClusterSpec

RULE_NAMESPACE = "fmcluster"


class ObservabilityStack(Stack):
    """Metrics, alerts and dashboards deployed with the cluster. Needs nothing from the other stacks.

    - An Amazon Managed Service for Prometheus workspace encrypted with its own customer managed key, logging
      to an encrypted log group, holding fmcluster's recording and alerting rules (fmcluster/observability).
    - The workspace's alert manager routes every alert to one SNS topic (encrypted with a second key the
      AMP and CloudWatch services may use for this account only), with an e-mail subscription per
      ``observability.alert_emails`` address (each must confirm the subscription mail).
    - With ``observability.grafana``, an Amazon Managed Grafana workspace (IAM Identity Center sign-in) whose
      role may only query this AMP workspace.

    Nodes remote-write to ``remote_write_url`` with SigV4; give their role ``grant_remote_write``.

    Attributes: ``workspace`` (the CfnWorkspace), ``workspace_arn``, ``workspace_id``, ``remote_write_url``,
    ``query_url``, ``alert_topic``, ``prometheus`` (the construct), ``grafana`` (or None).
    """

    def __init__(self, scope: Construct, id: str, *, spec: ClusterSpec, store_rules: Sequence[Path] = (),
                 **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.spec = spec
        region, account = self.region, self.account

        metrics_key = ClusterKey(
            self,
            "MetricsKey",
            description=f"{spec.name}: AMP workspace and its logs",
            service_principals={f"logs.{region}.amazonaws.com": logs_key_conditions(region, account)},
        )
        alerts_key = ClusterKey(
            self,
            "AlertsKey",
            description=f"{spec.name}: alert topic",
            service_principals={
                # the key policy cannot name the workspace (the workspace needs the topic, the topic this key):
                # any AMP workspace of this account and region
                "aps.amazonaws.com": _service_conditions(
                    account, f"arn:{self.partition}:aps:{region}:{account}:workspace/*"
                ),
                # CloudWatch alarms (`alarm`: the stores' alarms) publish to the same topic
                "cloudwatch.amazonaws.com": _service_conditions(
                    account, f"arn:{self.partition}:cloudwatch:{region}:{account}:alarm:*"
                ),
            },
        )

        self.alert_topic = sns.Topic(
            self,
            "AlertTopic",
            display_name=f"fmcluster {spec.name} alerts",
            master_key=alerts_key.key,
            enforce_ssl=True,
        )
        for address in spec.observability.alert_emails:
            self.alert_topic.add_subscription(subscriptions.EmailSubscription(address))

        self.prometheus = PrometheusWorkspace(
            self,
            "Prometheus",
            alias=f"fmcluster-{spec.name}",
            encryption_key=metrics_key.key,
            # rules.yaml, the kind's and the configured stores' rule files, the expected nodes and GPUs per node
            # group, rendered from the spec
            rules=observability.rules_text(spec.name, expected_nodes(spec),
                                           slurm=spec.orchestrator_kind.nodes.agent == "slurm",
                                           extra=spec.orchestrator_kind.rule_groups, stores=store_rules,
                                           serving=spec.serving),
            rule_namespace=RULE_NAMESPACE,
            alert_manager_definition=observability.alertmanager_definition(self.alert_topic.topic_arn, region),
        )
        self.workspace = self.prometheus.workspace
        self.alert_topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AmpAlertManagerPublishes",
                principals=[iam.ServicePrincipal("aps.amazonaws.com")],
                actions=["sns:GetTopicAttributes", "sns:Publish"],
                resources=[self.alert_topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnEquals": {"aws:SourceArn": self.workspace_arn},
                },
            )
        )
        # An explicit topic policy replaces SNS's default one, so CloudWatch alarms need their own statement or
        # their notifications are refused ("no resource-based policy allows the SNS:Publish action"); limited to
        # this account's alarms, as the key policy above is.
        self.alert_topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.alert_topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {"aws:SourceArn": f"arn:{self.partition}:cloudwatch:{region}:{account}:alarm:*"},
                },
            )
        )

        self.grafana: Optional[GrafanaWorkspace] = None
        if spec.observability.grafana:
            self.grafana = GrafanaWorkspace(self, "Grafana", name=f"fmcluster-{spec.name}", prometheus=self.prometheus)
            CfnOutput(self, "GrafanaUrl", value=f"https://{self.grafana.endpoint}")

        # Exported whatever the cluster stack imports (EKS's managed scraper takes the ARN, node collectors the
        # endpoint), so switching orchestrator never removes an export in use (docs/network.md, "Exports"); the names
        # are those of CDK's automatic references.
        for value in (self.prometheus.workspace_arn, self.prometheus.endpoint):
            self.export_value(value)
        CfnOutput(self, "WorkspaceId", value=self.workspace_id)
        CfnOutput(self, "RemoteWriteUrl", value=self.remote_write_url)
        CfnOutput(self, "QueryUrl", value=self.query_url)
        CfnOutput(self, "AlertTopicArn", value=self.alert_topic.topic_arn)

    @property
    def workspace_arn(self) -> str:
        return self.prometheus.workspace_arn

    @property
    def workspace_id(self) -> str:
        return self.prometheus.workspace_id

    @property
    def remote_write_url(self) -> str:
        return self.prometheus.remote_write_url

    @property
    def query_url(self) -> str:
        return self.prometheus.query_url

    def grant_remote_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """aps:RemoteWrite on this workspace only (the node collectors' role)."""
        return self.prometheus.grant_remote_write(grantee)

    def grant_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """aps:QueryMetrics, GetSeries, GetLabels, GetMetricMetadata on this workspace only."""
        return self.prometheus.grant_query(grantee)

    def alarm(self, alarm: Alarm) -> cloudwatch.Alarm:
        """A CloudWatch alarm a store declares (on its service's metric), notifying the alert topic on alarm and on
        recovery. A metric dimension that names another stack's resource makes this stack depend on that one: the
        app adds a store's alarms only where that is wanted."""
        built = cloudwatch.Alarm(
            self,
            alarm.id,
            alarm_description=alarm.description,
            metric=cloudwatch.Metric(
                namespace=alarm.namespace,
                metric_name=alarm.metric,
                dimensions_map=dict(alarm.dimensions),
                statistic=alarm.statistic,
                period=Duration.minutes(alarm.period_minutes),
            ),
            threshold=alarm.threshold,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD if alarm.below
            else cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=alarm.evaluation_periods,
            treat_missing_data=cloudwatch.TreatMissingData.MISSING,
        )
        built.add_alarm_action(cw_actions.SnsAction(self.alert_topic))
        built.add_ok_action(cw_actions.SnsAction(self.alert_topic))
        return built


def expected_nodes(spec: ClusterSpec) -> List[ExpectedNodes]:
    """Per ``node_group`` label, the nodes that should report and the GPUs each should have: the spec's node groups
    (as many nodes as the orchestrator kind expects up, `OrchestratorKind.expected_nodes`; catalog GPUs) and the
    orchestrator's extra instances (controller, login), whose collectors carry their role as node_group. Node groups
    of one name add up."""
    found: Dict[str, ExpectedNodes] = {}

    def add(name: str, nodes: int, gpus: int) -> None:
        seen = found.get(name)
        if seen is not None:
            nodes, gpus = seen.nodes + nodes, max(seen.gpus_per_node, gpus)
        found[name] = ExpectedNodes(name, nodes, gpus)

    up = spec.orchestrator_kind.expected_nodes(spec)
    for group in spec.node_groups:
        add(group.name, up.get(group.name, group.count), group.instance.gpus)
    for extra in spec.orchestrator_kind.extra_instances(spec):
        add(extra.role, extra.count, 0)
    return list(found.values())


def _service_conditions(account: str, source_arn_pattern: str) -> Dict[str, Any]:
    """A service principal may use the key only on behalf of this account's resources (confused deputy)."""
    return {"StringEquals": {"aws:SourceAccount": account}, "ArnLike": {"aws:SourceArn": source_arn_pattern}}

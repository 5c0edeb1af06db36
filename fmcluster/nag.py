"""Acknowledged findings of cdk-nag and cfn-lint: each names the rule, where it applies,
and why it is deliberate. Anything not acknowledged here fails synthesis (cdk-nag) or the
test suite (cfn-lint)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct

if TYPE_CHECKING:
    from fmcluster.app import ClusterStacks


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """cdk-nag: acknowledge `rule` (e.g. AwsSolutions-IAM4, or AwsSolutions-IAM5[Resource::...])
    on `scope` and below. cdk-nag 3 reports findings under its plugin's name."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))


def cfn_lint_ignore(resource: IConstruct, rules: Iterable[str], reason: str) -> None:
    """cfn-lint: ignore `rules` on one resource, recording the reason in its metadata."""
    cfn = resource if isinstance(resource, CfnResource) else resource.node.default_child
    if not isinstance(cfn, CfnResource):
        raise TypeError(f"{resource.node.path} is not a CloudFormation resource")
    existing = (cfn.get_metadata("cfn-lint") or {}).get("config", {}).get("ignore_checks", [])
    cfn.add_metadata("cfn-lint", {"config": {"ignore_checks": sorted(set(existing) | set(rules))}})
    cfn.add_metadata("fmcluster:cfn-lint-reason", reason)


def cdk_provider_handlers(stack: Stack) -> Iterable[CfnResource]:
    """Lambda handlers of CDK's built-in custom resource providers in `stack`."""
    for child in stack.node.children:
        if child.node.id.startswith("Custom::"):
            handler = child.node.try_find_child("Handler")
            if isinstance(handler, CfnResource):
                yield handler


def acknowledge_findings(stacks: ClusterStacks) -> None:
    """Findings on CDK-provided resources, acknowledged once for every stack, and the
    deliberate ones of our own constructs."""
    node_role = stacks.cluster.node_role or stacks.cluster.hyperpod.role  # type: ignore[union-attr]
    if stacks.cluster.node_role is not None:
        acknowledge(
            stacks.cluster.node_role,
            "AwsSolutions-IAM5[Resource::*]",
            "Only the SSM agent actions (ssm:UpdateInstanceInformation, ssmmessages:*Channel, ec2messages:*, as in "
            "AmazonSSMManagedInstanceCore) and pcs:RegisterComputeNodeGroupInstance use Resource *: these actions "
            "support no resource-level permissions (SSM and PCS user guides). Every action is named; none is a "
            "wildcard.",
        )
    acknowledge(
        node_role,
        f"AwsSolutions-IAM5[Resource::{stacks.storage.export_name('DataBucketArn')}/*]",
        "Nodes read datasets and write checkpoints anywhere in the cluster's own data bucket; the object "
        "actions are named one by one (no s3:* or s3:GetObject*).",
    )
    for stack in stacks.all:
        for handler in cdk_provider_handlers(stack):
            cfn_lint_ignore(
                handler,
                ["W3005"],
                "CDK's custom resource provider declares DependsOn on its role as well as a GetAtt; harmless",
            )

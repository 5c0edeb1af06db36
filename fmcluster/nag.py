"""Helpers to acknowledge cdk-nag and cfn-lint findings. Each construct acknowledges its own
deliberate findings with these, naming the rule and why; anything not acknowledged fails
synthesis (cdk-nag) or the test suite (cfn-lint)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """cdk-nag: acknowledge `rule` (e.g. AwsSolutions-IAM4, or AwsSolutions-IAM5[Resource::...])
    on `scope` and below. cdk-nag 3 reports findings under its plugin's name."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))


def nag_resource(stack: Stack, value: str) -> str:
    """`value` as cdk-nag prints it in a finding id: Ref → <X>, GetAtt → <X.Attr>, an imported export by its name,
    joins concatenated."""

    def render(v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, dict) and "Ref" in v:
            return f"<{v['Ref']}>"
        if isinstance(v, dict) and "Fn::GetAtt" in v:
            return f"<{'.'.join(v['Fn::GetAtt'])}>"
        if isinstance(v, dict) and isinstance(v.get("Fn::ImportValue"), str):
            return str(v["Fn::ImportValue"])
        if isinstance(v, dict) and "Fn::Join" in v:
            sep, parts = v["Fn::Join"]
            return str(sep).join(render(p) for p in parts)
        raise ValueError(f"cannot render {v!r} for a cdk-nag acknowledgment")

    return render(stack.resolve(value))


def acknowledge_wildcards(scope: IConstruct, resources: Sequence[str], why: str) -> None:
    """cdk-nag: acknowledge AwsSolutions-IAM5 for each of `resources` (rendered in `scope`'s stack) that has a
    wildcard, saying `why`: objects below a prefix, with actions named one by one."""
    stack = Stack.of(scope)
    for value in resources:
        shown = nag_resource(stack, value)
        if "*" in shown:
            acknowledge(scope, f"AwsSolutions-IAM5[Resource::{shown}]", why)


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
        if child.node.id.startswith("Custom::") or child.node.id == "AWSCDKCfnUtilsProviderCustomResourceProvider":  # CfnJson's
            handler = child.node.try_find_child("Handler")
            if isinstance(handler, CfnResource):
                yield handler

"""The CDK CLI the printed deploy commands name: the version package.json pins (a test keeps the two equal). `npx cdk`
runs whatever `cdk` npm finds, which outside this clone is the newest aws-cdk on the registry (npm has served a broken
aws-cdk@3.0.0, CONTRIBUTING.md); `npx --yes aws-cdk@<version>` runs the pinned one from any directory."""

from __future__ import annotations

CDK_CLI_VERSION = "2.1148.1"


def cdk(args: str) -> str:
    return f"npx --yes aws-cdk@{CDK_CLI_VERSION} {args}"

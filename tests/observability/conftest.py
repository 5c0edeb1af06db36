"""Fixtures for the observability tests: the stack is synthesized once per session (a CDK app start costs seconds)."""

from __future__ import annotations

import os
import shutil
from typing import Any, Dict

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import pytest  # noqa: E402

from fmcluster.registry import parse_spec  # noqa: E402
from fmcluster.spec import ClusterSpec  # noqa: E402

SPEC: Dict[str, Any] = {
    "name": "obs-test",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "account": "123456789012",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
    "observability": {"alert_emails": ["oncall@example.com", "gpu-team@example.com"], "grafana": True},
}


def require_tool(name: str) -> str:
    """The path of a test tool, or a clear failure saying how to install it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not installed: run `make setup` (scripts/install-tools.sh installs promtool, amtool and "
            f"shellcheck from the distribution's packages)",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_tool("promtool")


@pytest.fixture(scope="session")
def amtool() -> str:
    return require_tool("amtool")


@pytest.fixture(scope="session")
def obs_spec() -> ClusterSpec:
    return parse_spec(SPEC)


class Synthesized:
    """One app, synthesized once, holding:

    - ``stack``: the observability stack of `SPEC` (Grafana on, two alert e-mails, the FSx for Lustre store's alarm);
    - ``plain``: the same stack for a spec with Grafana off and no e-mails;
    - ``consumer``: a stack whose roles get ``grant_remote_write`` and ``grant_query`` (cross-stack use).
    """

    def __init__(self, spec: ClusterSpec) -> None:
        import aws_cdk as cdk
        from aws_cdk import aws_iam as iam
        from aws_cdk.assertions import Template

        from fmcluster.app import new_app
        from fmcluster.platforms.storage.fsx_lustre.mount import free_capacity_alarm
        from fmcluster.stacks.observability import ObservabilityStack

        env = cdk.Environment(account=spec.account, region=spec.region)
        self.app = new_app(spec)  # build_app's context and cdk-nag
        self.stack = ObservabilityStack(self.app, spec.stack_name("observability"), spec=spec, env=env)
        self.fsx_alarm = self.stack.alarm(free_capacity_alarm(
            id="FsxFreeCapacity", file_system_id="fs-0123456789abcdef0", capacity_gib=4800))
        plain_spec = parse_spec({**SPEC, "name": "obs-plain", "observability": {"grafana": False}})
        self.plain = ObservabilityStack(self.app, plain_spec.stack_name("observability"), spec=plain_spec, env=env)

        self.consumer = cdk.Stack(self.app, "obs-test-consumer", env=env)
        self.writer = iam.Role(self.consumer, "CollectorRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
        self.reader = iam.Role(self.consumer, "ReaderRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
        self.stack.grant_remote_write(self.writer)
        self.stack.grant_query(self.reader)

        # synth runs cdk-nag; an unacknowledged finding raises here
        self.assembly = self.app.synth()
        self.template = Template.from_stack(self.stack)
        self.json = self.template.to_json()
        self.plain_json = Template.from_stack(self.plain).to_json()
        self.consumer_json = Template.from_stack(self.consumer).to_json()


@pytest.fixture(scope="session")
def synthesized(obs_spec: ClusterSpec) -> Synthesized:
    return Synthesized(obs_spec)

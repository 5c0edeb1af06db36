"""Helpers for the boto3 tests (tests/aws): spec builders, Stubber and single-operation stubs (fixtures live in conftest)."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

import boto3
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from fmcluster.aws.context import Context
from fmcluster.aws.session import AwsClients
from fmcluster.registry import parse_spec
from fmcluster.spec import ClusterSpec

REGION = "us-east-1"
AZ = "us-east-1a"
ACCOUNT = "123456789012"  # moto's default account

BASE_SPEC: Dict[str, Any] = {
    "name": "fm-dev",
    "region": REGION,
    "availability_zone": AZ,
    "network": {"new_vpc": {"cidr": "10.0.0.0/16"}},
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}


def make_spec(**changes: Any) -> ClusterSpec:
    """The base spec with top-level keys replaced (node_groups given whole)."""
    data = copy.deepcopy(BASE_SPEC)
    data.update(changes)
    return parse_spec(data)


def group(name: str = "gpu", instance_type: str = "p5.48xlarge", count: int = 2, **kw: Any) -> Dict[str, Any]:
    if "ami_id" in kw:
        kw.setdefault("image_family", "dlami-ubuntu-22.04")
    return {"name": name, "instance_type": instance_type, "count": count, **kw}


def make_ctx(spec: ClusterSpec, account: Optional[str] = ACCOUNT) -> Context:
    """A check's context with clients of its own, made from the test's boto3 session (the aws_env fixture sets it
    up), not from a new session each (botocore's set-up of a session costs tens of milliseconds)."""
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    return Context(spec=spec, aws=AwsClients(spec.region, session=boto3.DEFAULT_SESSION), account=account)


def stubbed(ctx: Context, service: str) -> Stubber:
    """Replace `service` in ctx with a plain client wrapped in an active Stubber (no network)."""
    client = boto3.client(service, region_name=ctx.region)
    stub = Stubber(client)
    stub.activate()
    ctx.aws.set(service, client)
    return stub


def stub_operation(client: Any, operation: str, *responses: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Answer one operation of an otherwise real (e.g. moto-backed) client; returns the calls' params.

    Each response is a parsed response dict, or {"Error": {"Code": ..., "Message": ...}} for an error.
    The last response repeats.
    """
    calls: List[Dict[str, Any]] = []
    service_id = client.meta.service_model.service_id.hyphenize()

    def handler(params: Dict[str, Any], **_: Any) -> Any:
        calls.append(params)
        body = copy.deepcopy(responses[min(len(calls), len(responses)) - 1])
        status = 400 if "Error" in body else 200
        body.setdefault("ResponseMetadata", {"HTTPStatusCode": status})
        return AWSResponse("https://stub", status, {}, None), body

    client.meta.events.register(f"before-call.{service_id}.{operation}", handler)
    return calls


def preflight_checks(spec: Any) -> List[Any]:
    """Every check `fmcluster preflight` runs for `spec`: fmcluster's, its orchestrator kind's and its stores', as the
    CLI composes them."""
    from fmcluster.aws.preflight import checks_for
    from fmcluster.registry import kind_of, store_preflight_checks

    return checks_for(spec, kind_of(spec).preflight_checks(spec), store_preflight_checks(spec))

"""The interruptible-capacity-reservation lifecycle, an unknown service code, EC2
families without a quota mapping, and the AMP workspace quota."""

from __future__ import annotations

from typing import Any, Dict, List

import boto3
import pytest
from helpers.aws import REGION, group, make_ctx, make_spec, preflight_checks, stub_operation, stubbed

from fmcluster.aws import quotas
from fmcluster.aws.context import run_checks

pytestmark = pytest.mark.usefixtures("moto")

WORKSPACES = {"ServiceCode": "aps", "QuotaCode": "L-APSWORKSPC", "QuotaName": "Workspaces per region"}


def run(ctx: Any, check_id: str) -> Any:
    [result] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id == check_id])
    return result


def test_interruptible_capacity_reservation_instances_are_counted_and_named() -> None:
    ctx = make_ctx(make_spec())
    ec2 = boto3.client("ec2", region_name=REGION)
    ctx.aws.set("ec2", ec2)
    instances = [{"InstanceType": "p5.48xlarge", "InstanceLifecycle": "interruptible-capacity-reservation"},
                 {"InstanceType": "p5.48xlarge", "InstanceLifecycle": "capacity-block"},
                 {"InstanceType": "p5.48xlarge", "InstanceLifecycle": "spot"}]
    stub_operation(ec2, "DescribeInstances", {"Reservations": [{"Instances": instances}]})
    sq = stubbed(ctx, "service-quotas")
    sq.add_response("get_service_quota", {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-417A185B",
                                                    "QuotaName": "Running On-Demand P instances", "Value": 1000}})
    out = quotas.check_ec2_vcpus(ctx, "p")
    assert out.status == "pass" and "192 in use" in out.observed, out
    assert "in use includes 192 vCPUs of interruptible-capacity-reservation instances" in out.observed


def pcs_spec() -> Any:
    return make_spec(orchestrator={"type": "pcs"}, node_groups=[group(ami_id="ami-0123456789abcdef0")])


def unknown(ctx: Any, service: str) -> None:
    sq = stubbed(ctx, "service-quotas")
    sq.add_client_error("list_service_quotas", "NoSuchResourceException", "The specified resource does not exist.",
                        expected_params={"ServiceCode": service})


def test_an_unknown_service_code_is_a_skip_not_an_error() -> None:
    ctx = make_ctx(pcs_spec())
    stubbed(ctx, "pcs").add_response("list_clusters", {"clusters": []})
    unknown(ctx, "pcs")
    r = run(ctx, "quota:pcs")
    assert r.status == "skip" and "Service Quotas knows no service code 'pcs' in us-east-1" in r.observed, r
    assert "AWS PCS answers" in r.observed
    ctx = make_ctx(make_spec(orchestrator={"type": "hyperpod-slurm"}))
    unknown(ctx, "sagemaker")
    assert run(ctx, "quota:hyperpod-instances").status == "skip"
    ctx = make_ctx(make_spec())
    unknown(ctx, "aps")
    assert run(ctx, "quota:amp-workspaces").status == "skip"


def test_a_family_without_a_quota_mapping_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # every family in today's catalog is mapped: drop one mapping to stand for the next family added
    monkeypatch.delitem(quotas.EC2_VCPU_QUOTAS, "standard")
    ids = [p.id for p in preflight_checks(pcs_spec())]  # the PCS login node is an m5.xlarge
    assert "quota:ec2-unmapped:m5.xlarge" in ids and "quota:ec2-standard-vcpus" not in ids
    r = run(make_ctx(pcs_spec()), "quota:ec2-unmapped:m5.xlarge")
    assert r.status == "warn" and "maps no EC2 On-Demand vCPU quota to the m5 family" in r.observed
    assert not quotas.ec2_unmapped_types(make_spec())  # p5 is mapped


def workspace(alias: str, tags: Dict[str, str]) -> None:
    boto3.client("amp", region_name=REGION).create_workspace(alias=alias, tags=tags)


def amp_run(quota_list: List[Dict[str, Any]]) -> Any:
    ctx = make_ctx(make_spec())
    sq = stubbed(ctx, "service-quotas")
    sq.add_response("list_service_quotas", {"Quotas": quota_list}, {"ServiceCode": "aps"})
    sq.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "aps"})
    return run(ctx, "quota:amp-workspaces")


def test_the_amp_workspace_quota_is_checked() -> None:
    assert "quota:amp-workspaces" not in [p.id for p in preflight_checks(make_spec(observability={"enabled": False}))]
    workspace("team-a", {"team": "a"})
    r = amp_run([{**WORKSPACES, "Value": 1}])
    assert r.status == "warn" and "quota 1 workspaces, 1 in use, spec needs 1" in r.observed, r
    workspace("fmcluster-fm-dev", {"fmcluster:cluster": "fm-dev"})  # ours: updated in place
    r = amp_run([{**WORKSPACES, "Value": 2}])
    assert r.status == "pass" and "1 in use, spec needs 0" in r.observed and "ours exists" in r.observed


def test_no_workspace_quota_by_that_name_warns() -> None:
    r = amp_run([{**WORKSPACES, "QuotaName": "Rule groups per workspace", "Value": 100}])
    assert r.status == "warn" and "no 'aps' quota named 'Workspaces per region'" in r.observed

"""Quotas moto does not serve (EC2, SageMaker, FSx, PCS) through botocore Stubber; VPC quota via moto."""

from __future__ import annotations

from typing import Any, Dict, List

import boto3
import pytest
from helpers.aws import REGION, group, make_ctx, make_spec, preflight_checks, stub_operation, stubbed

from fmcluster.aws import quotas
from fmcluster.aws.context import run_checks
from fmcluster.platforms.hyperpod import preflight as hyperpod_preflight

pytestmark = pytest.mark.usefixtures("moto")


# real codes of the per-type HyperPod quotas these tests name (public quota listings; docs/preflight.md)
CODES = {"ml.p5.48xlarge for cluster usage": "L-8762A75F", "ml.p5e.48xlarge for cluster usage": "L-FD431820",
         "Running On-Demand P instances": "L-417A185B"}


def q(name: str, value: float, code: str = "", service: str = "sagemaker") -> Dict[str, Any]:
    code = code or CODES[name]
    return {"ServiceCode": service, "QuotaCode": code, "QuotaName": name, "Value": value}


def hyperpod_spec(**kw: Any) -> Any:
    kw.setdefault("orchestrator", {"type": "hyperpod-slurm"})
    return make_spec(**kw)


def stub_sagemaker_quotas(ctx: Any, applied: List[Dict[str, Any]], defaults: List[Dict[str, Any]]) -> Any:
    sq = stubbed(ctx, "service-quotas")
    sq.add_response("list_service_quotas", {"Quotas": applied}, {"ServiceCode": "sagemaker"})
    sq.add_response("list_aws_default_service_quotas", {"Quotas": defaults}, {"ServiceCode": "sagemaker"})
    return sq


def test_hyperpod_plans_sagemaker_quotas_not_ec2() -> None:
    ids = [p.id for p in preflight_checks(hyperpod_spec())]
    assert "quota:hyperpod:ml.p5.48xlarge" in ids and "quota:hyperpod-instances" in ids
    assert "quota:hyperpod:ml.m5.12xlarge" in ids  # the controller is a HyperPod instance too
    assert "quota:ec2-p-vcpus" not in ids


def test_hyperpod_demand_counts_controller_and_login_nodes() -> None:
    spec = hyperpod_spec(orchestrator={"type": "hyperpod-slurm", "hyperpod": {
        "controller_instance_type": "ml.m5.12xlarge", "login_instance_type": "ml.m5.12xlarge", "login_count": 2}})
    assert hyperpod_preflight.hyperpod_demand(spec) == {"ml.p5.48xlarge": 2, "ml.m5.12xlarge": 3}


def test_hyperpod_quota_looked_up_by_name() -> None:
    ctx = make_ctx(hyperpod_spec(node_groups=[group(count=4)]))
    stub_sagemaker_quotas(ctx, [q("ml.p5.48xlarge for cluster usage", 2)],
                          [q("ml.p5.48xlarge for cluster usage", 0), q("ml.p5e.48xlarge for cluster usage", 0)])
    out = hyperpod_preflight.check_hyperpod_type(ctx, "ml.p5.48xlarge")
    assert out.status == "fail" and "quota 2 instances, 0 in use, spec needs 4 (L-8762A75F, looked up by name)" \
        in out.observed
    assert "'ml.p5.48xlarge for cluster usage' to at least 4" in out.remedy


def test_hyperpod_default_quota_used_when_nothing_applied() -> None:
    ctx = make_ctx(hyperpod_spec(node_groups=[group(count=4)]))
    stub_sagemaker_quotas(ctx, [], [q("ml.p5.48xlarge for cluster usage", 8)])
    assert hyperpod_preflight.check_hyperpod_type(ctx, "ml.p5.48xlarge").status == "pass"


def test_hyperpod_type_without_quota_warns() -> None:
    """The name's spelling is only documented: not finding it warns."""
    ctx = make_ctx(hyperpod_spec(node_groups=[group(instance_type="p6-b300.48xlarge", count=1)]))
    stub_sagemaker_quotas(ctx, [], [q("ml.p5.48xlarge for cluster usage", 8)])
    out = hyperpod_preflight.check_hyperpod_type(ctx, "ml.p6-b300.48xlarge")
    assert out.status == "warn" and "no SageMaker quota named 'ml.p6-b300.48xlarge for cluster usage'" in out.observed


def test_ec2_quota_falls_back_to_default_value() -> None:
    ctx = make_ctx(make_spec())
    sq = stubbed(ctx, "service-quotas")
    sq.add_client_error("get_service_quota", "NoSuchResourceException", "no applied value")
    sq.add_response("get_aws_default_service_quota",
                    {"Quota": q("Running On-Demand P instances", 384, "L-417A185B", "ec2")},
                    {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    assert quotas.check_ec2_vcpus(ctx, "p").status == "pass"


def test_quota_access_denied_is_cannot_check() -> None:
    ctx = make_ctx(make_spec())
    sq = stubbed(ctx, "service-quotas")
    sq.add_client_error("get_service_quota", "AccessDeniedException", "denied")
    [r] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id == "quota:ec2-p-vcpus"])
    assert r.status == "warn" and "cannot check" in r.observed and "servicequotas:GetServiceQuota" in r.remedy


def test_vpc_quota_from_moto() -> None:
    ctx = make_ctx(make_spec())
    out = quotas.check_vpc_quota(ctx)  # moto: 1 default VPC, quota 5
    assert out.status == "pass" and "quota 5 VPCs, 1 in use" in out.observed
    ec2 = boto3.client("ec2", region_name=REGION)
    for i in range(4):
        ec2.create_vpc(CidrBlock=f"10.{i + 10}.0.0/16")
    out = quotas.check_vpc_quota(ctx)
    assert out.status == "warn" and "5 in use" in out.observed


def test_running_instances_outside_on_demand_are_not_counted() -> None:
    ctx = make_ctx(make_spec())
    ec2 = boto3.client("ec2", region_name=REGION)
    ctx.aws.set("ec2", ec2)
    inst = {"InstanceType": "p5.48xlarge", "InstanceLifecycle": "capacity-block"}
    stub_operation(ec2, "DescribeInstances", {"Reservations": [{"Instances": [inst, {"InstanceType": "m5.xlarge"}]}]})
    assert quotas._running_vcpus(ctx) == {"standard": 4}


def test_pcs_login_node_counts_against_the_standard_quota() -> None:
    spec = make_spec(orchestrator={"type": "pcs"}, node_groups=[group(ami_id="ami-0123456789abcdef0")])
    assert quotas.ec2_vcpu_demand(spec) == {"p": 384, "standard": 4}  # 2 x p5.48xlarge + m5.xlarge login
    ids = [p.id for p in preflight_checks(spec)]
    assert "offering:m5.xlarge" in ids and "quota:ec2-standard-vcpus" in ids and "quota:pcs" in ids
    spec = make_spec(orchestrator={"type": "pcs", "pcs": {"login_ami_id": "ami-0fedcba9876543210",
                                                          "login_image_family": "dlami-ubuntu-22.04"}},
                     node_groups=[group(ami_id="ami-0123456789abcdef0")])
    assert {"ami:gpu", "ami:pcs-login"} <= {p.id for p in preflight_checks(spec)}


# --- a re-run after deploy: the cluster's own resources are not "others" ------


def test_the_clusters_own_vpc_is_neither_in_use_nor_needed_on_a_re_run() -> None:
    spec = make_spec()
    ctx = make_ctx(spec)
    ec2 = boto3.client("ec2", region_name=REGION)
    for i in range(3):
        ec2.create_vpc(CidrBlock=f"10.{i + 10}.0.0/16")
    ec2.create_vpc(CidrBlock="10.20.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [
        {"Key": "fmcluster:cluster", "Value": spec.name}]}])
    out = quotas.check_vpc_quota(ctx)  # moto: quota 5; the default VPC and 3 others in use, ours not counted
    assert out.status == "pass" and "quota 5 VPCs, 4 in use, spec needs 0" in out.observed, out
    assert "the cluster's own VPC exists" in out.observed


def test_the_clusters_own_nat_address_is_neither_in_use_nor_needed_on_a_re_run() -> None:
    spec = make_spec()
    ctx = make_ctx(spec)
    ec2 = boto3.client("ec2", region_name=REGION)
    ctx.aws.set("ec2", ec2)
    sq = stubbed(ctx, "service-quotas")
    sq.add_response("get_service_quota", {"Quota": q("EC2-VPC Elastic IPs", 2, "L-0263D0A3", "ec2")})
    addresses = [{"PublicIp": "203.0.113.1", "Tags": [{"Key": "aws:cloudformation:stack-name",
                                                       "Value": spec.stack_name("network")}]},
                 {"PublicIp": "203.0.113.2"}, {"PublicIp": "203.0.113.3"}]
    stub_operation(ec2, "DescribeAddresses", {"Addresses": addresses})
    out = quotas.check_eip_quota(ctx)
    assert out.status == "pass" and "2 in use, spec needs 0" in out.observed, out


def test_the_clusters_own_running_nodes_are_not_counted_as_others() -> None:
    spec = make_spec()
    ctx = make_ctx(spec)
    ec2 = boto3.client("ec2", region_name=REGION)
    ctx.aws.set("ec2", ec2)
    ours = {"InstanceType": "p5.48xlarge", "Tags": [{"Key": "fmcluster:cluster", "Value": spec.name}]}
    theirs = {"InstanceType": "p5.48xlarge", "Tags": [{"Key": "fmcluster:cluster", "Value": "another"}]}
    stub_operation(ec2, "DescribeInstances", {"Reservations": [{"Instances": [ours, ours, theirs]}]})
    assert quotas._running_vcpus(ctx) == {"p": 192}

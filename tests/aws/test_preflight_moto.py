"""preflight against moto (mock_aws) for what moto implements; Service Quotas stubbed."""

from __future__ import annotations

from typing import Any, Dict, List

import boto3
import pytest
import yaml
from helpers import ROOT
from helpers.aws import ACCOUNT, AZ, REGION, group, make_ctx, make_spec, preflight_checks, stub_operation, stubbed

from fmcluster.aws.context import run_checks
from fmcluster.aws.preflight import CDK_BOOTSTRAP_PARAMETER, run_preflight
from fmcluster.registry import load_spec, parse_spec

pytestmark = pytest.mark.usefixtures("moto")


def by_id(report: Any) -> Dict[str, Any]:
    return {c.id: c for c in report.checks}


# the real names of the quotas these tests answer by code (docs/preflight.md)
QUOTA_NAMES = {"L-417A185B": "Running On-Demand P instances", "L-F678F1CE": "VPCs per Region",
               "L-0263D0A3": "EC2-VPC Elastic IPs"}


def quota(code: str, value: float, service: str = "ec2") -> Dict[str, Any]:
    return {"Quota": {"ServiceCode": service, "QuotaCode": code, "QuotaName": QUOTA_NAMES[code], "Value": value}}


def stub_default_quotas(ctx: Any, p_vcpus: float = 384.0) -> Any:
    sq = stubbed(ctx, "service-quotas")
    sq.add_response("get_service_quota", quota("L-417A185B", p_vcpus),
                    {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    sq.add_response("get_service_quota", quota("L-F678F1CE", 5, "vpc"), {"ServiceCode": "vpc", "QuotaCode": "L-F678F1CE"})
    sq.add_response("get_service_quota", quota("L-0263D0A3", 5), {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3"})
    # AMP's workspace quota, by its name (no public code: docs/preflight.md)
    sq.add_response("list_service_quotas", {"Quotas": [{"ServiceCode": "aps", "QuotaCode": "L-APSWORKSPC",
                                                        "QuotaName": "Workspaces per region", "Value": 25}]},
                    {"ServiceCode": "aps"})
    sq.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "aps"})
    return sq


def bootstrap() -> None:
    boto3.client("ssm", region_name=REGION).put_parameter(Name=CDK_BOOTSTRAP_PARAMETER, Value="28", Type="String")


def test_default_spec_all_pass() -> None:
    bootstrap()
    ctx = make_ctx(make_spec(account=ACCOUNT), account=None)
    sq = stub_default_quotas(ctx)
    # moto reserves /aws/service/ parameter names: answer the DLAMI one, then the real bootstrap parameter
    ec2 = boto3.client("ec2", region_name=REGION)
    dlami = next(i["ImageId"] for i in ec2.describe_images(Owners=["amazon"])["Images"]
                 if i["Architecture"] == "x86_64" and i.get("RootDeviceName") == "/dev/sda1")
    ssm = boto3.client("ssm", region_name=REGION)
    ctx.aws.set("ssm", ssm)
    bootstrap_version = ssm.get_parameter(Name=CDK_BOOTSTRAP_PARAMETER)
    stub_operation(ssm, "GetParameter", {"Parameter": {"Name": "dlami", "Type": "String", "Value": dlami}},
                   bootstrap_version)
    report = run_preflight(ctx.spec, ctx.aws, ctx=ctx)
    checks = by_id(report)
    assert list(checks) == ["credentials", "availability-zone", "second-availability-zone", "offering:p5.48xlarge",
                            "image:dlami-ubuntu-22.04:x86_64",
                            "quota:ec2-p-vcpus", "quota:vpcs", "quota:elastic-ips", "quota:amp-workspaces", "cdk-bootstrap",
                            "stacks"]
    assert {c.status for c in report.checks} == {"pass"}, report.render_text()
    assert report.account == ACCOUNT and report.exit_code == 0
    assert "quota 384 vCPUs, 0 in use, spec needs 384" in checks["quota:ec2-p-vcpus"].observed
    assert "no stacks deployed yet" in checks["stacks"].observed
    sq.assert_no_pending_responses()


def test_account_mismatch_fails() -> None:
    ctx = make_ctx(make_spec(account="210987654321"), account=None)
    results = run_checks(ctx, preflight_checks(ctx.spec)[:1])
    assert results[0].status == "fail" and ACCOUNT in results[0].observed
    assert "210987654321" in results[0].remedy


def test_missing_bootstrap_fails_with_command() -> None:
    ctx = make_ctx(make_spec())
    [r] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id == "cdk-bootstrap"])
    assert r.status == "fail" and r.remedy == f"npx cdk bootstrap aws://{ACCOUNT}/{REGION}"


def test_type_not_offered_in_az_names_the_zones_that_offer_it() -> None:
    ctx = make_ctx(make_spec(node_groups=[group(instance_type="p6-b200.48xlarge", count=1)]))
    [r] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id.startswith("offering:")])
    assert r.status == "fail" and "not offered in us-east-1a" in r.observed
    assert "us-east-1c" in r.remedy


def test_unknown_az_fails() -> None:
    ctx = make_ctx(make_spec(availability_zone="us-east-1z"))
    [r] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id == "availability-zone"])
    assert r.status == "fail" and "does not exist" in r.observed and "us-east-1a" in r.remedy


def test_unknown_second_az_fails_naming_the_network_field() -> None:
    """Both zones are judged from one DescribeAvailabilityZones answer."""
    ctx = make_ctx(make_spec(network={"new_vpc": {"second_availability_zone": "us-east-1z"}}))
    calls: List[Any] = []
    ctx.client("ec2").meta.events.register("before-call.ec2.DescribeAvailabilityZones",
                                           lambda params, **_: calls.append(params))
    first, second = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id.endswith("availability-zone")])
    assert first.status == "pass" and "us-east-1a" in first.observed
    assert second.status == "fail" and "us-east-1z does not exist" in second.observed
    assert second.remedy.startswith("set network.new_vpc.second_availability_zone to one of")
    assert "us-east-1b" in second.remedy and len(calls) == 1


def test_p_quota_too_small_and_in_use() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.run_instances(ImageId=ami, InstanceType="p5.48xlarge", MinCount=1, MaxCount=1, Placement={"AvailabilityZone": AZ})
    ctx = make_ctx(make_spec())
    sq = stubbed(ctx, "service-quotas")
    sq.add_response("get_service_quota", quota("L-417A185B", 192))
    sq.add_response("get_service_quota", quota("L-417A185B", 512))
    [q] = [p for p in preflight_checks(ctx.spec) if p.id == "quota:ec2-p-vcpus"]
    [r] = run_checks(ctx, [q])
    assert r.status == "fail" and "quota 192 vCPUs, 192 in use, spec needs 384" in r.observed
    assert "Running On-Demand P instances" in r.remedy
    ctx.cache.clear()
    [r] = run_checks(ctx, [q])
    assert r.status == "warn" and "raise 'Running On-Demand P instances' to 576" in r.remedy


def test_capacity_blocks_do_not_need_on_demand_quota() -> None:
    spec = make_spec(node_groups=[group(capacity={"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"})])
    ids = [p.id for p in preflight_checks(spec)]
    assert "quota:ec2-p-vcpus" not in ids and "capacity:cr-0123456789abcdef0" in ids


def existing_network(cidr: str = "10.1.0.0/24", az: str = AZ) -> Dict[str, Any]:
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=az)["Subnet"]["SubnetId"]
    rtb = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    return {"vpc_id": vpc, "subnet_ids": [subnet], "route_table_ids": [rtb]}


def network_results(existing: Dict[str, Any], count: int = 2) -> Dict[str, Any]:
    ctx = make_ctx(make_spec(network={"existing_vpc": existing}, node_groups=[group(count=count)]))
    checks = [p for p in preflight_checks(ctx.spec) if p.id in ("vpc", "subnets", "route-tables")]
    return {r.id: r for r in run_checks(ctx, checks)}


def test_existing_network_pass() -> None:
    results = network_results(existing_network())
    assert [r.status for r in results.values()] == ["pass", "pass", "pass"], results
    assert "251 free addresses in us-east-1a" in results["subnets"].observed


def test_existing_subnet_too_small_wrong_az_and_missing() -> None:
    existing = existing_network(cidr="10.1.0.0/28")
    results = network_results(existing, count=20)
    assert results["subnets"].status == "fail" and "11 free addresses < 20" in results["subnets"].observed
    existing = existing_network(az="us-east-1b")
    results = network_results({**existing, "subnet_ids": existing["subnet_ids"] + ["subnet-0123456789abcdef0"]})
    sub = results["subnets"]
    assert sub.status == "fail" and "not found: subnet-0123456789abcdef0" in sub.observed
    assert "not in us-east-1a" in sub.observed and "one AZ" in sub.remedy


def test_existing_subnet_below_headroom_warns() -> None:
    results = network_results(existing_network(cidr="10.1.0.0/26"), count=2)  # 59 free < 2*1.25+64
    assert results["subnets"].status == "warn"


def test_missing_vpc_fails() -> None:
    results = network_results({"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["subnet-0123456789abcdef0"]})
    assert results["vpc"].status == "fail" and results["subnets"].status == "fail"


def test_ami_checks() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    x86 = [i for i in ec2.describe_images(Owners=["amazon"])["Images"] if i["Architecture"] == "x86_64"]
    sda1 = next(i["ImageId"] for i in x86 if i.get("RootDeviceName") == "/dev/sda1")
    xvda = next(i["ImageId"] for i in x86 if i.get("RootDeviceName") == "/dev/xvda")
    for ami_id, family, status in ((sda1, "dlami-ubuntu-22.04", "pass"), ("ami-0123456789abcdef0", "dlami-ubuntu-22.04",
                                                                           "fail"),
                                   (xvda, "dlami-al2023", "pass"), (xvda, "dlami-ubuntu-22.04", "fail")):
        ctx = make_ctx(make_spec(node_groups=[group(ami_id=ami_id, image_family=family)]))
        [r] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id == "ami:gpu"])
        assert r.status == status, (family, r)
        if (ami_id, family) == (xvda, "dlami-ubuntu-22.04"):
            assert "root device /dev/xvda" in r.observed and "image_family" in r.remedy


def test_kinds_that_boot_their_own_image_check_no_launch_template_image() -> None:
    """EKS (AMI type), HyperPod and ParallelCluster (its Image.Os) never launch the DLAMI parameter; a
    ParallelCluster queue's own AMI is checked for existence and architecture, not for image_family's root device."""
    ec2 = boto3.client("ec2", region_name=REGION)
    xvda = next(i["ImageId"] for i in ec2.describe_images(Owners=["amazon"])["Images"]
                if i["Architecture"] == "x86_64" and i.get("RootDeviceName") == "/dev/xvda")
    for example in ("eks-p5", "hyperpod-eks-p5", "hyperpod-slurm-p5", "parallelcluster-p5"):
        ids = [p.id for p in preflight_checks(load_spec(ROOT / "examples" / f"{example}.yaml"))]
        assert not [i for i in ids if i.startswith("image:")], (example, ids)
    data = yaml.safe_load((ROOT / "examples" / "parallelcluster-p5.yaml").read_text())
    data["node_groups"][0]["ami_id"] = xvda
    ctx = make_ctx(parse_spec(data))
    [r] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id == "ami:h100"])
    assert r.status == "pass", r


def test_the_default_image_parameter_is_checked_against_the_account() -> None:
    """The DLAMI parameter name is built from the DLAMI guide's rule; preflight proves it exists in the region and
    names a readable image with the family's root device."""
    ec2 = boto3.client("ec2", region_name=REGION)
    sda1 = next(i["ImageId"] for i in ec2.describe_images(Owners=["amazon"])["Images"]
                if i["Architecture"] == "x86_64" and i.get("RootDeviceName") == "/dev/sda1")
    ctx = make_ctx(make_spec())
    [planned] = [p for p in preflight_checks(ctx.spec) if p.id == "image:dlami-ubuntu-22.04:x86_64"]
    parameter = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
    for answer, status in (({"Parameter": {"Name": parameter, "Type": "String", "Value": sda1}}, "pass"),
                           ({"Error": {"Code": "ParameterNotFound", "Message": "not found"}}, "fail")):
        ctx.aws.set("ssm", boto3.client("ssm", region_name=REGION))
        stub_operation(ctx.client("ssm"), "GetParameter", answer)
        [r] = run_checks(ctx, [planned])
        assert r.status == status, r


def test_existing_stack_is_reported() -> None:
    cfn = boto3.client("cloudformation", region_name=REGION)
    cfn.create_stack(StackName="fm-dev-network", TemplateBody='{"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}')
    ctx = make_ctx(make_spec())
    [r] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id == "stacks"])
    assert r.status == "pass" and "fm-dev-network CREATE_COMPLETE" in r.observed


def test_skip_by_prefix() -> None:
    bootstrap()
    ctx = make_ctx(make_spec())
    report = run_preflight(ctx.spec, ctx.aws, ctx=ctx, skip=["quota", "image"])
    skipped = [c.id for c in report.checks if c.status == "skip"]
    assert skipped == ["image:dlami-ubuntu-22.04:x86_64", "quota:ec2-p-vcpus", "quota:vpcs", "quota:elastic-ips",
                       "quota:amp-workspaces"]
    assert report.exit_code == 0


def test_unimplemented_call_is_an_error_answer() -> None:
    """moto lacks ListServiceQuotas for ec2: the check errors, the run goes on, exit 1."""
    bootstrap()
    ctx = make_ctx(make_spec())
    report = run_preflight(ctx.spec, ctx.aws, ctx=ctx)
    checks = by_id(report)
    assert checks["quota:ec2-p-vcpus"].status == "error"
    assert checks["stacks"].status == "pass" and report.exit_code == 1


def test_existing_data_bucket_is_checked_for_existence_and_region() -> None:
    from fmcluster.aws import network

    spec = make_spec(storage={"data_bucket": {"existing_name": "team-ml-data"}})
    assert "bucket" in [p.id for p in preflight_checks(spec)]
    assert "bucket" not in [p.id for p in preflight_checks(make_spec())]
    ctx = make_ctx(spec)
    out = network.check_bucket(ctx, bucket="team-ml-data")
    assert out.status == "fail" and "does not exist" in out.observed
    boto3.client("s3", region_name="us-west-2").create_bucket(
        Bucket="team-ml-data", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    out = network.check_bucket(ctx, bucket="team-ml-data")
    assert out.status == "fail" and "is in us-west-2" in out.observed
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="team-ml-data-east")
    assert network.check_bucket(ctx, bucket="team-ml-data-east").status == "pass"

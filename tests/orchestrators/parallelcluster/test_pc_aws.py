"""ParallelCluster's preflight checks and status describers against stubbed AWS APIs (botocore Stubber): no
credentials, no network."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Dict, List

import pytest
from helpers.aws import make_ctx, stubbed
from helpers.parallelcluster import make_spec

from fmcluster.aws.context import Context
from fmcluster.aws.preflight import checks_for
from fmcluster.aws.results import FAIL, PASS
from fmcluster.aws.results import WARN as WARN_STATUS
from fmcluster.aws.status import BAD, OK, PENDING, WARN, collect_status, describers
from fmcluster.orchestrators.parallelcluster import preflight
from fmcluster.orchestrators.parallelcluster.status import _cluster, _nested_stack
from fmcluster.registry import kind_named, kind_of, status_describers

pytestmark = pytest.mark.usefixtures("aws_env")
ACCOUNT = "123456789012"
T0 = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)
TEMPLATE_KEY = "parallelcluster/3.16.1/templates/custom_resource/cluster.yaml"
EXISTING = {"existing_vpc": {"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["subnet-0123456789abcdef0"],
                             "route_table_ids": ["rtb-0123456789abcdef0"]}}


def ctx_for(spec: Any = None) -> Context:
    return make_ctx(spec or make_spec(), ACCOUNT)


# --- preflight ---------------------------------------------------------------------------------------------------


def test_the_kinds_checks_join_preflight_and_the_head_node_counts():
    ids = [c.id for c in checks_for(make_spec(), kind_of(make_spec()).preflight_checks(make_spec()))]
    assert {"provider:parallelcluster", "quota:cloudformation-stacks", "quota:iam-parallelcluster",
            "quota:route53-hosted-zones", "offering:m7i.2xlarge"} <= set(ids)
    assert not any(i.startswith(("network:", "keypair:")) for i in ids)
    ids = [c.id for c in preflight.checks(make_spec({"ssh_key_name": "ops"}, network=EXISTING))]
    assert {"network:head-node-route", "network:vpc-dns", "keypair:head-node"} <= set(ids)


def test_provider_template_found_by_an_s3_head_of_the_regions_object():
    ctx = ctx_for()
    s3 = stubbed(ctx, "s3")
    s3.add_response("head_object", {"ContentLength": 18824}, {"Bucket": "us-east-1-aws-parallelcluster", "Key": TEMPLATE_KEY})
    out = preflight.check_provider_template(ctx)
    assert out.status == PASS and f"s3://us-east-1-aws-parallelcluster/{TEMPLATE_KEY} (18824 bytes)" == out.observed
    s3.assert_no_pending_responses()


@pytest.mark.parametrize("code", ["404", "NoSuchKey"])
def test_provider_template_missing_fails(code):
    ctx = ctx_for()
    stubbed(ctx, "s3").add_client_error("head_object", code, "Not Found", http_status_code=404)
    out = preflight.check_provider_template(ctx)
    assert out.status == FAIL and "publishes no 3.16.1 provider in us-east-1" in out.remedy


@pytest.mark.parametrize("code", ["403", "AccessDenied"])
def test_provider_template_access_denied_is_a_cannot_check_warning(code):
    """Review minor 6: a caller without s3:GetObject (or behind an SCP) gets a warning naming the action, not a
    false 'not published' (S3 also answers 403 for a missing key without s3:ListBucket: nothing to conclude)."""
    ctx = ctx_for()
    stubbed(ctx, "s3").add_client_error("head_object", code, "Forbidden", http_status_code=403)
    out = preflight.check_provider_template(ctx)
    assert out.status == WARN_STATUS and "cannot check" in out.observed and "s3:GetObject" in out.remedy


def test_a_region_parallelcluster_does_not_support_fails_without_a_call():
    spec = make_spec(region="eu-central-2", availability_zone="eu-central-2a")
    ctx = ctx_for(spec)
    s3 = stubbed(ctx, "s3")  # no response queued: any call would raise
    out = preflight.check_provider_template(ctx)
    assert out.status == FAIL and "does not support eu-central-2" in out.observed
    s3.assert_no_pending_responses()


def _quotas(ctx: Context, service: str, quotas: List[Dict[str, Any]]) -> None:
    sq = stubbed(ctx, "service-quotas")
    sq.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": service})
    sq.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": service})


def _stacks(names: List[str]) -> Dict[str, Any]:
    return {"StackSummaries": [{"StackName": n, "StackStatus": "CREATE_COMPLETE", "CreationTime": T0} for n in names]}


@pytest.mark.parametrize("limit, existing, status, need", [
    (2000, ["other"], PASS, 8),               # 4 ParallelCluster stacks + fmcluster's 4
    (9, ["a", "b"], "warn", 8),               # fits the quota, not beside the 2 stacks in use
    (5, ["pc-test-network"], FAIL, 7),        # fmcluster's network stack exists already
    # a re-run after deploy (review minor 9): every stack exists, ParallelCluster's own (named after the cluster) too
    (9, ["pc-test-network", "pc-test-storage", "pc-test-observability", "pc-test-cluster", "pc-test"], PASS, 0),
])
def test_cloudformation_stack_count(limit, existing, status, need):
    ctx = ctx_for()
    _quotas(ctx, "cloudformation", [{"QuotaName": "Stack count", "QuotaCode": "L-0485CB21", "Value": float(limit)}])
    stubbed(ctx, "cloudformation").add_response("list_stacks", _stacks(existing))
    out = preflight.check_stacks(ctx)
    assert out.status == status and f"spec needs {need}" in out.observed, out


def test_stack_count_quota_not_found_is_a_warning():
    """docs/preflight.md: a quota not found is not a pass, it warns (review minor 7)."""
    ctx = ctx_for()
    _quotas(ctx, "cloudformation", [])
    out = preflight.check_stacks(ctx)
    assert out.status == WARN_STATUS and "not checked" in out.observed


def test_a_stack_named_after_the_cluster_that_is_not_ours_fails():
    """ParallelCluster names its stack after the cluster: another stack of that name fails the create."""
    ctx = ctx_for()
    cfn = stubbed(ctx, "cloudformation")
    cfn.add_client_error("describe_stacks", "ValidationError", "Stack with id pc-test does not exist",
                         expected_params={"StackName": "pc-test"})
    cfn.add_response("describe_stacks", _stack("pc-test", "CREATE_COMPLETE", Tags=[
        {"Key": "fmcluster:cluster", "Value": "pc-test"}]), {"StackName": "pc-test"})
    cfn.add_response("describe_stacks", _stack("pc-test", "CREATE_COMPLETE", Tags=[
        {"Key": "team", "Value": "other"}]), {"StackName": "pc-test"})
    assert preflight.check_cluster_stack_name(ctx).status == PASS  # none
    out = preflight.check_cluster_stack_name(ctx)  # this cluster's own (a re-run)
    assert out.status == PASS and "this cluster's ParallelCluster stack" in out.observed
    out = preflight.check_cluster_stack_name(ctx)
    assert out.status == FAIL and "is not this cluster's" in out.observed and "cluster_name" in out.remedy


def test_iam_room_for_roles_profiles_and_policies():
    ctx = ctx_for()
    iam = stubbed(ctx, "iam")
    summary = {"Roles": 10, "RolesQuota": 1000, "InstanceProfiles": 5, "InstanceProfilesQuota": 1000,
               "Policies": 3, "PoliciesQuota": 1500}
    iam.add_response("get_account_summary", {"SummaryMap": summary})
    assert preflight.check_iam(ctx).status == PASS
    iam.add_response("get_account_summary", {"SummaryMap": {**summary, "Roles": 998}})
    out = preflight.check_iam(ctx)
    assert out.status == FAIL and "Roles 998/1000 (+3)" in out.observed


def test_route53_hosted_zone_for_parallelclusters_private_dns():
    ctx = ctx_for()
    r53 = stubbed(ctx, "route53")
    r53.add_response("get_hosted_zone_count", {"HostedZoneCount": 500})
    r53.add_response("get_account_limit", {"Limit": {"Type": "MAX_HOSTED_ZONES_BY_OWNER", "Value": 500}, "Count": 500},
                     {"Type": "MAX_HOSTED_ZONES_BY_OWNER"})
    assert preflight.check_hosted_zones(ctx).status == "warn"


def _route_tables(routes: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"RouteTables": [{"RouteTableId": "rtb-0123456789abcdef0", "Routes": routes}]}


@pytest.mark.parametrize("route, status, words", [
    ({"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": "nat-0123456789abcdef0", "State": "active"}, PASS,
     "-> nat-0123456789abcdef0"),
    ({"DestinationCidrBlock": "0.0.0.0/0", "GatewayId": "igw-0123456789abcdef0", "State": "active"}, FAIL,
     "internet gateway"),
    ({"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": "nat-0123456789abcdef0", "State": "blackhole"}, FAIL,
     "no active default route"),
    ({"DestinationCidrBlock": "10.0.0.0/16", "GatewayId": "local", "State": "active"}, FAIL, "no active default route"),
])
def test_the_head_node_subnet_needs_a_nat_route(route, status, words):
    ctx = ctx_for(make_spec(network=EXISTING))
    stubbed(ctx, "ec2").add_response("describe_route_tables", _route_tables([route]),
                                     {"RouteTableIds": ["rtb-0123456789abcdef0"]})
    out = preflight.check_route_out(ctx, ["rtb-0123456789abcdef0"])
    assert out.status == status and words in out.observed


def test_vpc_dns_must_be_on():
    ctx = ctx_for(make_spec(network=EXISTING))
    ec2 = stubbed(ctx, "ec2")
    vpc = "vpc-0123456789abcdef0"
    ec2.add_response("describe_vpc_attribute", {"VpcId": vpc, "EnableDnsSupport": {"Value": True}},
                     {"VpcId": vpc, "Attribute": "enableDnsSupport"})
    ec2.add_response("describe_vpc_attribute", {"VpcId": vpc, "EnableDnsHostnames": {"Value": False}},
                     {"VpcId": vpc, "Attribute": "enableDnsHostnames"})
    out = preflight.check_vpc_dns(ctx, vpc)
    assert out.status == FAIL and "enableDnsHostnames off" in out.observed and "--enable-dns-hostnames" in out.remedy


@pytest.mark.parametrize("os_name, key_type, status", [("ubuntu2204", "rsa", FAIL), ("ubuntu2204", "ed25519", PASS),
                                                       ("alinux2023", "rsa", PASS)])
def test_ssh_key_type_fits_the_os(os_name, key_type, status):
    ctx = ctx_for(make_spec({"os": os_name, "ssh_key_name": "ops"}))
    stubbed(ctx, "ec2").add_response("describe_key_pairs", {"KeyPairs": [{"KeyName": "ops", "KeyType": key_type}]},
                                     {"KeyNames": ["ops"]})
    assert preflight.check_key_pair(ctx, "ops").status == status


def test_a_missing_key_pair_fails():
    ctx = ctx_for(make_spec({"ssh_key_name": "ops"}))
    stubbed(ctx, "ec2").add_client_error("describe_key_pairs", "InvalidKeyPair.NotFound", "no such key")
    assert preflight.check_key_pair(ctx, "ops").status == FAIL


# --- status ------------------------------------------------------------------------------------------------------


def _stack(name: str, status: str, **extra: Any) -> Dict[str, Any]:
    return {"Stacks": [{"StackName": name, "StackStatus": status, "CreationTime": T0, **extra}]}


def _instances(*states: str, node_type: str = "Compute") -> Dict[str, Any]:
    return {"Reservations": [{"Instances": [
        {"InstanceId": f"i-0{i:016x}", "InstanceType": "p5.48xlarge" if node_type == "Compute" else "m7i.2xlarge",
         "PrivateIpAddress": f"10.0.0.{i + 10}", "State": {"Name": s, "Code": 16}} for i, s in enumerate(states)]}]}


MESSAGES = [{"id": "KeyPairValidator", "type": "KeyPairValidator", "level": "WARNING",
             "message": "If you do not specify a key pair, you can't connect to the instance unless ..."},
            {"id": "UrlValidator", "type": "UrlValidator", "level": "INFO", "message": "ok"}]


def _stub_cluster(ctx: Context, pc_status: str = "CREATE_COMPLETE", messages: str = json.dumps(MESSAGES),
                  heads: Any = ("running",), computes: Any = ("running", "running", "pending")) -> None:
    cfn = stubbed(ctx, "cloudformation")
    cfn.add_response("describe_stacks", _stack("pc-test", pc_status, Tags=[
        {"Key": "parallelcluster:version", "Value": "3.16.1"}]), {"StackName": "pc-test"})
    ec2 = stubbed(ctx, "ec2")
    ec2.add_response("describe_instances", _instances(*heads, node_type="HeadNode"))
    ec2.add_response("describe_instances", _instances(*computes))
    cfn.add_response("describe_stacks", _stack("pc-test-cluster", "CREATE_COMPLETE", Outputs=[
        {"OutputKey": "ParallelClusterValidationMessages", "OutputValue": messages}]), {"StackName": "pc-test-cluster"})


def test_the_cluster_its_nodes_and_its_validation_messages():
    ctx = ctx_for()
    _stub_cluster(ctx)
    item = _cluster(ctx, "pc-test")
    assert (item.type, item.name, item.state, item.health) == ("ParallelCluster cluster", "pc-test", "CREATE_COMPLETE", OK)
    assert "ParallelCluster 3.16.1" in item.detail
    kids = {(c.type, c.name): c for c in item.children}
    head = next(c for c in item.children if c.type == "head node")
    assert head.state == "running" and head.health == OK and "m7i.2xlarge" in head.detail
    compute = kids[("compute instances", "3")]
    assert compute.state == "1 pending, 2 running" and compute.health == PENDING
    validation = [(c.name, c.state, c.health) for c in item.children if c.type == "validation"]
    assert validation == [("KeyPairValidator", "WARNING", WARN), ("UrlValidator", "INFO", OK)]


def test_truncated_validation_messages_still_show():
    ctx = ctx_for()
    _stub_cluster(ctx, messages="TRUNCATED:" + json.dumps(MESSAGES)[:40])
    (v,) = [c for c in _cluster(ctx, "pc-test").children if c.type == "validation"]
    assert v.health == WARN and "cut short" in v.detail


def test_an_error_before_the_cut_stays_an_error():
    """Review minor 10: the whole messages before the cut keep their levels; only the cut itself is a warning."""
    error = {"id": "InstanceTypeValidator", "type": "InstanceTypeValidator", "level": "ERROR", "message": "bad type"}
    ctx = ctx_for()
    _stub_cluster(ctx, messages="TRUNCATED:" + json.dumps([error] + MESSAGES)[:160])
    validation = [(c.name, c.state, c.health) for c in _cluster(ctx, "pc-test").children if c.type == "validation"]
    assert validation[0] == ("InstanceTypeValidator", "ERROR", BAD)
    assert validation[-1][1:] == ("WARNING", WARN)


def test_a_cluster_whose_stack_was_never_created_is_bad():
    ctx = ctx_for()
    stubbed(ctx, "cloudformation").add_client_error("describe_stacks", "ValidationError",
                                                    "Stack with id pc-test does not exist")
    item = _cluster(ctx, "pc-test")
    assert item.health == BAD and item.state == "no stack"


def test_the_provider_nested_stack():
    ctx = ctx_for()
    arn = f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/pc-test-cluster-Provider-1/abc"
    stubbed(ctx, "cloudformation").add_response("describe_stacks", _stack(
        "pc-test-cluster-Provider-1", "CREATE_COMPLETE", Description="AWS ParallelCluster Cluster Custom Resource Provider",
        Outputs=[{"OutputKey": "ServiceToken",
                  "OutputValue": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:pcluster-cfn-abc"}]), {"StackName": arn})
    item = _nested_stack(ctx, arn)
    assert (item.type, item.health) == ("ParallelCluster provider", OK) and "function pcluster-cfn-abc" in item.detail


def test_collect_status_describes_provider_and_cluster_from_the_cluster_stack():
    known = describers(kind_named("parallelcluster").status_describers())
    assert {"Custom::PclusterCluster", "AWS::CloudFormation::Stack"} <= set(known)
    ctx = ctx_for()
    sts = stubbed(ctx, "sts")
    sts.add_response("get_caller_identity", {"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/u", "UserId": "u"})
    cfn = stubbed(ctx, "cloudformation")
    for part in ("network", "storage", "observability"):
        cfn.add_client_error("describe_stacks", "ValidationError", f"Stack with id pc-test-{part} does not exist")
    provider_arn = f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/pc-test-cluster-Provider-1/abc"
    cfn.add_response("describe_stacks", _stack("pc-test-cluster", "CREATE_IN_PROGRESS"), {"StackName": "pc-test-cluster"})
    cfn.add_response("list_stack_resources", {"StackResourceSummaries": [
        {"LogicalResourceId": "ParallelClusterProvider", "ResourceType": "AWS::CloudFormation::Stack",
         "PhysicalResourceId": provider_arn, "ResourceStatus": "CREATE_COMPLETE", "LastUpdatedTimestamp": T0},
        {"LogicalResourceId": "ParallelCluster", "ResourceType": "Custom::PclusterCluster",
         "PhysicalResourceId": "pc-test", "ResourceStatus": "CREATE_IN_PROGRESS", "LastUpdatedTimestamp": T0},
    ]}, {"StackName": "pc-test-cluster"})
    cfn.add_response("describe_stacks", _stack("pc-test-cluster-Provider-1", "CREATE_COMPLETE",
                                               Description="AWS ParallelCluster Cluster Custom Resource Provider"))
    cfn.add_response("describe_stacks", _stack("pc-test", "CREATE_IN_PROGRESS"), {"StackName": "pc-test"})
    ec2 = stubbed(ctx, "ec2")
    ec2.add_response("describe_instances", _instances("pending", node_type="HeadNode"))
    ec2.add_response("describe_instances", {"Reservations": []})
    cfn.add_response("describe_stacks", _stack("pc-test-cluster", "CREATE_IN_PROGRESS"), {"StackName": "pc-test-cluster"})
    status = collect_status(ctx.spec, ctx.aws, ctx=ctx, registered=status_describers())
    cluster = status.stacks[3]
    assert [(r.type, r.health) for r in cluster.resources] == [("ParallelCluster provider", OK),
                                                               ("ParallelCluster cluster", PENDING)]
    assert status.overall == "in progress"
    assert "ParallelCluster cluster pc-test: CREATE_IN_PROGRESS" in status.render_text()


def _image(ami: str, owner: str = ACCOUNT, tags: Dict[str, str] = {}) -> Dict[str, Any]:  # noqa: B006
    return {"Images": [{"ImageId": ami, "OwnerId": owner, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]}


@pytest.mark.parametrize("owner, tags, status, words", [
    (ACCOUNT, {"parallelcluster:version": "3.16.1"}, PASS, "built by ParallelCluster 3.16.1"),
    (ACCOUNT, {}, FAIL, "no parallelcluster:version tag"),
    (ACCOUNT, {"parallelcluster:version": "3.13.0"}, FAIL, "built by ParallelCluster 3.13.0"),
    ("999999999999", {}, WARN_STATUS, "tags are not visible here"),
])
def test_a_custom_ami_must_come_from_this_parallelclusters_build_image(owner, tags, status, words):
    spec = make_spec({"custom_ami": "ami-0123456789abcdef0"})
    assert "ami:parallelcluster:ami-0123456789abcdef0" in [c.id for c in preflight.checks(spec)]
    ctx = ctx_for(spec)
    stubbed(ctx, "ec2").add_response("describe_images", _image("ami-0123456789abcdef0", owner, tags),
                                     {"ImageIds": ["ami-0123456789abcdef0"]})
    out = preflight.check_custom_ami(ctx, "ami-0123456789abcdef0")
    assert out.status == status and words in out.observed, out


def test_a_custom_ami_that_does_not_exist_fails():
    ctx = ctx_for()
    stubbed(ctx, "ec2").add_client_error("describe_images", "InvalidAMIID.NotFound", "not found")
    assert preflight.check_custom_ami(ctx, "ami-0123456789abcdef0").status == FAIL
    assert not [c for c in preflight.checks(make_spec()) if c.id.startswith("ami:parallelcluster:")]


def test_static_on_demand_gpu_queues_are_warned_about_before_a_first_deploy():
    gpu = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 4}
    cpu = {"name": "cpu", "role": "cpu", "instance_type": "c5.18xlarge", "count": 2}
    ids = [c.id for c in preflight.checks(make_spec(node_groups=[gpu, cpu]))]
    assert "capacity:static-on-demand:gpu" in ids and "capacity:static-on-demand:cpu" not in ids
    dynamic = make_spec({"queues": {"gpu": {"min_count": 0}}}, node_groups=[gpu])
    assert not [i for i in (c.id for c in preflight.checks(dynamic)) if i.startswith("capacity:static-on-demand:")]
    out = preflight.check_static_on_demand(ctx_for(), group="gpu", static=4, instance_type="p5.48xlarge")
    assert out.status == WARN_STATUS and "queues.gpu.min_count: 0" in out.remedy

"""`fmcluster preflight`: read-only AWS checks that find account problems in seconds, before `cdk deploy`.

Every check returns status, observed, expected and a remedy; an AWS fault is that check's answer
(`results.classify`). `checks_for` decides from the spec alone which checks apply.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence

from botocore.exceptions import ClientError

from fmcluster.aws import amp_quotas, capacity, network, quotas
from fmcluster.aws.context import (
    Context,
    PreflightCheck,
    Progress,
    has_code,
    paginate,
    run_checks,
)
from fmcluster.aws.results import FAIL, PASS, WARN, Outcome, Report
from fmcluster.aws.session import AwsClients

if TYPE_CHECKING:
    from fmcluster.spec import ClusterSpec

STACK_PARTS = ("network", "storage", "observability", "cluster")
CDK_BOOTSTRAP_PARAMETER = "/cdk-bootstrap/hnb659fds/version"  # default qualifier
CDK_MIN_BOOTSTRAP_VERSION = 6  # aws-cdk-lib templates refuse older bootstrap stacks
# Stack states that make `cdk deploy` fail until someone acts.
STACK_BLOCKED = {
    "ROLLBACK_COMPLETE": "delete the stack (it never deployed) and deploy again",
    "ROLLBACK_FAILED": "delete the stack (retain the resources that failed) and deploy again",
    "DELETE_FAILED": "delete it again, retaining the resources that failed",
    "UPDATE_ROLLBACK_FAILED": "run `aws cloudformation continue-update-rollback` on it",
    "IMPORT_ROLLBACK_FAILED": "fix the import and roll back",
}


def check_credentials(ctx: Context) -> Outcome:
    ident = ctx.client("sts").get_caller_identity()
    ctx.account = str(ident["Account"])
    want = ctx.spec.account
    observed = f"account {ctx.account} as {ident.get('Arn', '?')}"
    if want and want != ctx.account:
        return Outcome(FAIL, observed, f"account {want} (spec)",
                       f"use credentials for account {want} (--profile), or fix `account` in the spec")
    return Outcome(PASS, observed, f"account {want}" if want else "any account (the spec names none)")


def check_cdk_bootstrap(ctx: Context) -> Outcome:
    expected = f"CDK bootstrap version >= {CDK_MIN_BOOTSTRAP_VERSION} in {ctx.region}"
    remedy = f"npx cdk bootstrap aws://{ctx.account or 'ACCOUNT'}/{ctx.region}"
    try:
        value = ctx.client("ssm").get_parameter(Name=CDK_BOOTSTRAP_PARAMETER)["Parameter"]["Value"]
    except ClientError as e:
        if has_code(e, "ParameterNotFound"):
            return Outcome(FAIL, f"{ctx.region} is not bootstrapped ({CDK_BOOTSTRAP_PARAMETER} missing)", expected,
                           remedy)
        raise
    try:
        version = int(value)
    except ValueError:
        return Outcome(WARN, f"bootstrap version {value!r} is not a number", expected, remedy)
    if version < CDK_MIN_BOOTSTRAP_VERSION:
        return Outcome(FAIL, f"bootstrap version {version}", expected, remedy)
    return Outcome(PASS, f"bootstrap version {version}", expected)


def check_availability_zone(ctx: Context, *, second: bool = False) -> Outcome:
    """The GPU AZ, or (``second``) the new VPC's second-AZ subnet's, exists and is available to this account."""
    az = ctx.spec.second_availability_zone if second else ctx.spec.availability_zone
    field = "network.new_vpc.second_availability_zone" if second else "availability_zone"
    if "availability_zones" not in ctx.cache:  # one call answers both zones' checks
        ctx.cache["availability_zones"] = ctx.client("ec2").describe_availability_zones(
            AllAvailabilityZones=True)["AvailabilityZones"]
    zones = ctx.cache["availability_zones"]
    zone = next((z for z in zones if z.get("ZoneName") == az), None)
    expected = f"{az} available in {ctx.region}"
    if zone is None:
        names = sorted(z["ZoneName"] for z in zones if z.get("ZoneType", "availability-zone") == "availability-zone")
        return Outcome(FAIL, f"{az} does not exist in {ctx.region}", expected,
                       f"set {field} to one of {', '.join(names)}")
    observed = f"{az} ({zone.get('ZoneId', '?')}) {zone.get('State')}"
    if zone.get("State") != "available" or zone.get("OptInStatus") == "not-opted-in":
        return Outcome(FAIL, observed, expected, "pick an available zone (AZ names differ per account; IDs do not)")
    return Outcome(PASS, observed, expected)


def check_offering(ctx: Context, instance_type: str) -> Outcome:
    ec2 = ctx.client("ec2")
    az = ctx.spec.availability_zone
    offered = paginate(ec2, "describe_instance_type_offerings", "InstanceTypeOfferings",
                       LocationType="availability-zone",
                       Filters=[{"Name": "instance-type", "Values": [instance_type]}])
    zones = sorted({o["Location"] for o in offered})
    expected = f"{instance_type} offered in {az}"
    if az in zones:
        return Outcome(PASS, f"{instance_type} offered in {az}", expected)
    if zones:
        return Outcome(FAIL, f"{instance_type} not offered in {az}; offered in {', '.join(zones)}", expected,
                       f"set availability_zone to one of {', '.join(zones)} (or reserve capacity there)")
    return Outcome(FAIL, f"{instance_type} not offered in {ctx.region}", expected,
                   "choose a region that offers it (see `aws ec2 describe-instance-type-offerings`)")


def check_ami(ctx: Context, ami: str, arch: str, instance_type: str, root_device: Optional[str] = None) -> Outcome:
    expected = f"{ami} available, {arch}" + (f", root device {root_device}" if root_device else "")
    try:
        images = ctx.client("ec2").describe_images(ImageIds=[ami])["Images"]
    except ClientError as e:
        if has_code(e, "InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidAMIID.Unavailable"):
            images = []
        else:
            raise
    if not images:
        return Outcome(FAIL, f"{ami} not found in {ctx.region} (or not shared with the account)", expected,
                       "AMIs are regional: copy it to the region or fix ami_id")
    img = images[0]
    observed = f"{ami} {img.get('State')} {img.get('Architecture')} ({img.get('Name', '')})"
    if img.get("Architecture") != arch:
        return Outcome(FAIL, observed, expected, f"use a {arch} AMI for {instance_type}")
    if img.get("State") != "available":
        return Outcome(FAIL, observed, expected, "use an available AMI")
    if root_device and img.get("RootDeviceName") != root_device:
        return Outcome(FAIL, f"{observed}, root device {img.get('RootDeviceName')}", expected,
                       "set the group's image_family to the AMI's family (the launch template would add a second "
                       "disk instead of sizing the root)")
    return Outcome(PASS, observed, expected)


def check_default_image(ctx: Context, parameter: str, arch: str, instance_type: str, root_device: str) -> Outcome:
    """The public SSM parameter CloudFormation resolves at deploy time exists here and names a readable image."""
    expected = f"{parameter} names an available {arch} image (root device {root_device})"
    try:
        ami = ctx.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
    except ClientError as e:
        if has_code(e, "ParameterNotFound"):
            return Outcome(FAIL, f"{parameter} does not exist in {ctx.region}", expected,
                           "pick another image_family, or give the group an ami_id")
        raise
    outcome = check_ami(ctx, ami, arch, instance_type, root_device)
    return Outcome(outcome.status, f"{parameter} -> {outcome.observed}", expected, outcome.remedy)


def check_stacks(ctx: Context) -> Outcome:
    cfn = ctx.client("cloudformation")
    states, blocked, busy = [], [], []
    for part in STACK_PARTS:
        name = ctx.spec.stack_name(part)
        try:
            stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        except ClientError as e:
            if has_code(e, "ValidationError") and "does not exist" in str(e):
                continue
            raise
        status = stack.get("StackStatus", "?")
        states.append(f"{name} {status}")
        if status in STACK_BLOCKED:
            blocked.append(f"{name}: {STACK_BLOCKED[status]}")
        elif status.endswith("_IN_PROGRESS"):
            busy.append(name)
    observed = "; ".join(states) if states else "no stacks deployed yet"
    expected = "no stack in a failed or in-progress state"
    if blocked:
        return Outcome(FAIL, observed, expected, "; ".join(blocked))
    if busy:
        return Outcome(WARN, observed, expected, f"wait for {', '.join(busy)} to finish")
    return Outcome(PASS, observed, expected)


def checks_for(spec: ClusterSpec, kind_checks: Sequence[PreflightCheck] = (),
               store_checks: Sequence[PreflightCheck] = ()) -> List[PreflightCheck]:
    """The checks that apply to `spec`, in order (credentials first: later ones need the account); `kind_checks` are
    the orchestrator kind's (`OrchestratorKind.preflight_checks`), run after fmcluster's quota checks, `store_checks`
    the configured stores' (`fmcluster.registry.store_preflight_checks`), after the buckets'."""
    p: List[PreflightCheck] = [
        PreflightCheck("credentials", "credentials and account", "sts", check_credentials),
        PreflightCheck("availability-zone", f"availability zone {spec.availability_zone}", "ec2", check_availability_zone),
    ]
    if spec.network.new_vpc is not None:  # every kind gets the second-AZ subnet (docs/network.md)
        p.append(PreflightCheck("second-availability-zone", f"second availability zone {spec.second_availability_zone}",
                                "ec2", partial(check_availability_zone, second=True)))
    kind = spec.orchestrator_kind
    extra = [e.instance_type for e in kind.extra_instances(spec)] if kind.nodes.in_account else []
    for t in sorted({g.instance_type for g in spec.node_groups} | set(extra)):
        p.append(PreflightCheck(f"offering:{t}", f"{t} offered in {spec.availability_zone}", "ec2",
                         partial(check_offering, instance_type=t)))
    images: Dict[str, Any] = {}
    for g in spec.node_groups:
        if g.ami_id:
            p.append(PreflightCheck(f"ami:{g.name}", f"AMI of group {g.name}", "ec2", partial(
                check_ami, ami=g.ami_id, arch=g.instance.architecture, instance_type=g.instance_type,
                root_device=g.image.root_device if kind.nodes.image_family else None)))
        elif kind.nodes.image_family:  # other kinds boot their own image (EKS AMI type, HyperPod, ParallelCluster's Os)
            parameter = g.image.default_parameter(g.instance.architecture)
            if parameter:
                images.setdefault(parameter, g)
    for parameter, g in images.items():
        p.append(PreflightCheck(f"image:{g.image_family}:{g.instance.architecture}", f"image {parameter}", "ssm",
                                partial(check_default_image, parameter=parameter, arch=g.instance.architecture,
                                        instance_type=g.instance_type, root_device=g.image.root_device)))
    for rid in sorted({g.capacity.reservation_id for g in spec.node_groups if g.capacity.reservation_id}):
        p.append(PreflightCheck(f"capacity:{rid}", f"capacity reservation {rid}", "ec2",
                         partial(capacity.check_reservation, reservation_id=rid)))
    for arn in sorted({g.capacity.training_plan_arn for g in spec.node_groups if g.capacity.training_plan_arn}):
        p.append(PreflightCheck(f"training-plan:{arn.split('/')[-1]}", "training plan", "sagemaker",
                         partial(capacity.check_training_plan, arn=arn)))
    p += _quota_checks(spec)
    p += kind_checks
    existing = spec.network.existing_vpc
    if existing is not None:
        p.append(PreflightCheck("vpc", f"VPC {existing.vpc_id}", "ec2", network.check_vpc))
        p.append(PreflightCheck("subnets", "subnets and free addresses", "ec2", network.check_subnets))
        if existing.route_table_ids:
            p.append(PreflightCheck("route-tables", "route tables", "ec2", network.check_route_tables))
    bucket = network.existing_bucket_name(spec)
    if bucket:
        p.append(PreflightCheck("bucket", f"bucket {bucket}", "s3", partial(network.check_bucket, bucket=bucket)))
    p += store_checks
    p.append(PreflightCheck("cdk-bootstrap", "CDK bootstrap", "ssm", check_cdk_bootstrap))
    p.append(PreflightCheck("stacks", "existing stacks", "cloudformation", check_stacks))
    return p


def _quota_checks(spec: ClusterSpec) -> List[PreflightCheck]:
    p: List[PreflightCheck] = []
    for bucket in quotas.EC2_VCPU_QUOTAS:
        if quotas.ec2_vcpu_demand(spec).get(bucket):
            code, name, _ = quotas.EC2_VCPU_QUOTAS[bucket]
            p.append(PreflightCheck(f"quota:ec2-{bucket}-vcpus", name, "service-quotas",
                             partial(quotas.check_ec2_vcpus, bucket=bucket)))
    for t in quotas.ec2_unmapped_types(spec):
        p.append(PreflightCheck(f"quota:ec2-unmapped:{t}", f"On-Demand vCPU quota of {t}", "service-quotas",
                                partial(quotas.check_ec2_unmapped, instance_type=t)))
    new = spec.network.new_vpc
    if new is not None:
        p.append(PreflightCheck("quota:vpcs", "VPCs per Region", "service-quotas", quotas.check_vpc_quota))
        if new.nat_gateway:
            p.append(PreflightCheck("quota:elastic-ips", "Elastic IPs (NAT gateway)", "service-quotas",
                             quotas.check_eip_quota))
    if spec.observability.enabled:
        p.append(PreflightCheck("quota:amp-workspaces", amp_quotas.WORKSPACES_QUOTA, "service-quotas",
                                amp_quotas.check_amp_workspaces))
    return p


def run_preflight(
    spec: ClusterSpec,
    aws: AwsClients,
    *,
    label: str = "",
    skip: Iterable[str] = (),
    progress: Optional[Progress] = None,
    ctx: Optional[Context] = None,
    kind_checks: Sequence[PreflightCheck] = (),
    store_checks: Sequence[PreflightCheck] = (),
    deadline_s: Optional[float] = None,
    tolerate_unchecked: bool = False,
) -> Report:
    """Every applicable check, the whole run within `deadline_s` seconds (None: unbounded, for tests)."""
    ctx = ctx or Context(spec=spec, aws=aws)
    if deadline_s is not None:
        ctx.deadline = time.monotonic() + deadline_s
    planned = checks_for(spec, kind_checks, store_checks)
    checks = run_checks(ctx, planned, skip=skip, progress=progress, command="preflight", deadline_s=deadline_s)
    done = {c.id for c in checks}
    return Report("preflight", label or spec.name, aws.region, ctx.account, checks,
                  not_run=[p.id for p in planned if p.id not in done], tolerate_unchecked=tolerate_unchecked)


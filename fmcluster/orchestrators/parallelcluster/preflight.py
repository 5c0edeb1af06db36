"""Preflight checks of AWS ParallelCluster: the provider template for the region, the quotas a cluster draws on
beyond EC2 (CloudFormation stacks, IAM roles and policies, a Route 53 private hosted zone), the head node's route
out and VPC DNS for an existing VPC, the SSH key pair when one is named, and that every custom AMI was built by this
ParallelCluster version. EC2 vCPUs (node groups and the head node) are the shared quota checks'."""

from __future__ import annotations

from functools import partial
from typing import Any, List

from botocore.exceptions import ClientError

from fmcluster.aws.context import Context, PreflightCheck, has_code, paginate
from fmcluster.aws.ownership import is_ours
from fmcluster.aws.quotas import find_quota, judge
from fmcluster.aws.results import CANNOT_CHECK, FAIL, PASS, WARN, Outcome
from fmcluster.orchestrators.parallelcluster.settings import (
    PCLUSTER_VERSION,
    ParallelClusterOrchestrator,
    cluster_name,
    min_count,
    provider_template,
)

# Regions ParallelCluster 3.16.1 supports (pcluster/resources/supported-regions in the aws-parallelcluster wheel).
SUPPORTED_REGIONS = frozenset((
    "af-south-1 ap-east-1 ap-northeast-1 ap-northeast-2 ap-south-1 ap-southeast-1 ap-southeast-2 ap-southeast-3 "
    "ap-southeast-5 ap-southeast-7 ca-central-1 cn-north-1 cn-northwest-1 eu-central-1 eu-north-1 eu-south-1 "
    "eu-west-1 eu-west-2 eu-west-3 il-central-1 me-south-1 sa-east-1 us-east-1 us-east-2 us-iso-east-1 "
    "us-iso-west-1 us-isob-east-1 us-gov-east-1 us-gov-west-1 us-west-1 us-west-2"
).split())
# Stacks a cluster adds: the provider, its policies stack, the cluster's own stack and its queues stack.
PCLUSTER_STACKS = 4
FMCLUSTER_STACKS = ("network", "storage", "observability", "cluster")
# CloudFormation counts every stack that is not deleted.
LIVE_STACK_STATUSES = [
    "CREATE_IN_PROGRESS", "CREATE_FAILED", "CREATE_COMPLETE", "ROLLBACK_IN_PROGRESS", "ROLLBACK_FAILED",
    "ROLLBACK_COMPLETE", "DELETE_IN_PROGRESS", "DELETE_FAILED", "UPDATE_IN_PROGRESS",
    "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_COMPLETE", "UPDATE_FAILED", "UPDATE_ROLLBACK_IN_PROGRESS",
    "UPDATE_ROLLBACK_FAILED", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_ROLLBACK_COMPLETE",
    "REVIEW_IN_PROGRESS", "IMPORT_IN_PROGRESS", "IMPORT_COMPLETE", "IMPORT_ROLLBACK_IN_PROGRESS",
    "IMPORT_ROLLBACK_FAILED", "IMPORT_ROLLBACK_COMPLETE",
]
# Ubuntu 22.04 and 24.04 refuse RSA keys; ParallelCluster's KeyPairValidator fails the create.
NO_RSA_OSES = ("ubuntu2204", "ubuntu2404")


def checks(spec: Any) -> List[PreflightCheck]:
    found = [
        PreflightCheck("provider:parallelcluster", f"ParallelCluster {PCLUSTER_VERSION} provider template", "s3",
                       check_provider_template),
        PreflightCheck("quota:cloudformation-stacks", "CloudFormation stack count", "cloudformation", check_stacks),
        PreflightCheck("stack:parallelcluster-name", "no other stack has the cluster's name", "cloudformation",
                       check_cluster_stack_name),
        PreflightCheck("quota:iam-parallelcluster", "IAM roles, instance profiles and policies", "iam", check_iam),
        PreflightCheck("quota:route53-hosted-zones", "Route 53 hosted zones (the cluster's private DNS zone)",
                       "route53", check_hosted_zones),
    ]
    existing = spec.network.existing_vpc
    if existing is not None:
        found.append(PreflightCheck("network:head-node-route", "head node subnet routes to AWS APIs", "ec2",
                                    partial(check_route_out, route_table_ids=list(existing.route_table_ids))))
        found.append(PreflightCheck("network:vpc-dns", "VPC DNS resolution and host names", "ec2",
                                    partial(check_vpc_dns, vpc_id=existing.vpc_id)))
    for g in spec.node_groups:
        static = min_count(spec, g)
        if g.instance.is_gpu and g.capacity.type == "on-demand" and static > 0:
            found.append(PreflightCheck(f"capacity:static-on-demand:{g.name}", f"queue {g.name}: {static} static "
                                        f"on-demand {g.instance_type}", "ec2",
                                        partial(check_static_on_demand, group=g.name, static=static,
                                                instance_type=g.instance_type)))
    settings = ParallelClusterOrchestrator.of(spec).parallelcluster
    for ami in dict.fromkeys([*([settings.custom_ami] if settings.custom_ami else []),
                              *(g.ami_id for g in spec.node_groups if g.ami_id)]):
        found.append(PreflightCheck(f"ami:parallelcluster:{ami}", f"{ami} built by ParallelCluster {PCLUSTER_VERSION}",
                                    "ec2", partial(check_custom_ami, ami=ami)))
    key = settings.ssh_key_name
    if key:
        found.append(PreflightCheck("keypair:head-node", f"EC2 key pair {key}", "ec2", partial(check_key_pair, name=key)))
    return found


def check_provider_template(ctx: Context) -> Outcome:
    bucket, key = provider_template(ctx.region)
    url = f"s3://{bucket}/{key}"
    if ctx.region not in SUPPORTED_REGIONS:
        return Outcome(FAIL, f"ParallelCluster {PCLUSTER_VERSION} does not support {ctx.region}",
                       "a region ParallelCluster supports", "use another region (its user guide lists them)")
    expected = f"the provider template of ParallelCluster {PCLUSTER_VERSION} in {ctx.region}"
    try:
        head = ctx.client("s3").head_object(Bucket=bucket, Key=key)
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "?")
        if has_code(e, "403", "AccessDenied", "Forbidden"):
            # the caller may lack s3:GetObject (an SCP, a permissions boundary); S3 also answers 403 rather than 404
            # for a missing key to a caller without s3:ListBucket on the bucket: nothing to conclude either way
            return Outcome(WARN, f"{CANNOT_CHECK}: {url}: access denied ({code})", expected,
                           f"grant the caller s3:GetObject on arn:aws:s3:::{bucket}/{key} (HeadObject needs it) and "
                           "run preflight again; if it still says 403, the object is missing: ParallelCluster "
                           f"publishes no {PCLUSTER_VERSION} provider in {ctx.region}")
        if not has_code(e, "404", "NoSuchKey", "NotFound"):
            raise
        return Outcome(FAIL, f"{url}: {code}", expected,
                       f"ParallelCluster publishes no {PCLUSTER_VERSION} provider in {ctx.region}: pick another "
                       "region, or change PCLUSTER_VERSION to a version published here")
    return Outcome(PASS, f"{url} ({head.get('ContentLength', '?')} bytes)", "the template exists")


def check_stacks(ctx: Context) -> Outcome:
    q = find_quota(ctx, "cloudformation", lambda n: n.strip().lower() == "stack count")
    if q is None:  # docs/preflight.md: a quota not found is not a pass, it warns
        return Outcome(WARN, "no CloudFormation quota named 'Stack count' found: not checked",
                       "room for the cluster's stacks", "confirm the stack count quota in the Service Quotas console")
    stacks = paginate(ctx.client("cloudformation"), "list_stacks", "StackSummaries",
                      StackStatusFilter=LIVE_STACK_STATUSES)
    names = {s.get("StackName") for s in stacks}
    ours = [ctx.spec.stack_name(p) for p in FMCLUSTER_STACKS]
    # a re-run after deploy: ParallelCluster's stacks exist once its own stack (named after the cluster) does
    pcluster = 0 if cluster_name(ctx.spec) in names else PCLUSTER_STACKS
    need = pcluster + sum(1 for n in ours if n not in names)
    return judge(need, len(stacks), float(q["Value"]), "", "stacks", q["QuotaName"], " (looked up by name)")


def check_cluster_stack_name(ctx: Context) -> Outcome:
    """ParallelCluster names its own stack after the cluster: a stack of that name that is not this cluster's makes
    the create fail ("already exists")."""
    name = cluster_name(ctx.spec)
    expected = f"no stack named {name}, or this cluster's own"
    try:
        stacks = ctx.client("cloudformation").describe_stacks(StackName=name).get("Stacks", [])
    except ClientError as e:
        if has_code(e, "ValidationError") and "does not exist" in str(e):
            return Outcome(PASS, f"no stack named {name}", expected)
        raise
    if not stacks:
        return Outcome(PASS, f"no stack named {name}", expected)
    if is_ours(stacks[0].get("Tags", []), ctx.spec, "cluster"):
        return Outcome(PASS, f"{name} is this cluster's ParallelCluster stack ({stacks[0].get('StackStatus', '?')})",
                       expected)
    return Outcome(FAIL, f"a stack named {name} exists ({stacks[0].get('StackStatus', '?')}) and is not this "
                   "cluster's", expected,
                   "ParallelCluster names its stack after the cluster, so the create would fail: set "
                   "orchestrator.parallelcluster.cluster_name to another name, or delete that stack")


def check_iam(ctx: Context) -> Outcome:
    """Roles: the provider's Lambda, the head node and one per queue; instance profiles: the head node and one per
    queue; customer managed policies: fmcluster's two and the provider's five (ParallelCluster 3.x templates)."""
    summary = ctx.client("iam").get_account_summary()["SummaryMap"]
    queues = len(ctx.spec.node_groups)
    needs = (("Roles", 2 + queues), ("InstanceProfiles", 1 + queues), ("Policies", 7))
    parts, worst = [], PASS
    for item, need in needs:
        used, limit = int(summary.get(item, 0)), int(summary.get(f"{item}Quota", 0))
        parts.append(f"{item} {used}/{limit} (+{need})")
        if limit and used + need > limit:
            worst = FAIL
    observed = "; ".join(parts)
    if worst == FAIL:
        return Outcome(FAIL, observed, "room for the cluster's roles, profiles and policies",
                       "delete unused IAM roles, instance profiles or policies, or request an IAM quota increase")
    return Outcome(PASS, observed, "room for the cluster's roles, profiles and policies")


def check_hosted_zones(ctx: Context) -> Outcome:
    r53 = ctx.client("route53")
    used = int(r53.get_hosted_zone_count()["HostedZoneCount"])
    limit = float(r53.get_account_limit(Type="MAX_HOSTED_ZONES_BY_OWNER")["Limit"]["Value"])
    return judge(1, used, limit, "", "hosted zones", "Route 53 hosted zones per account")


def check_route_out(ctx: Context, route_table_ids: List[str]) -> Outcome:
    """The head node has no public IP: its subnet needs a default route to a NAT gateway (or a transit gateway
    / appliance that leads to one)."""
    tables = ctx.client("ec2").describe_route_tables(RouteTableIds=route_table_ids)["RouteTables"]
    missing, via = [], []
    for t in tables:
        default = next((r for r in t.get("Routes", []) if r.get("DestinationCidrBlock") == "0.0.0.0/0"
                        and r.get("State", "active") == "active"), None)
        target = "" if default is None else next(
            (default[k] for k in ("NatGatewayId", "TransitGatewayId", "NetworkInterfaceId") if default.get(k)), "")
        if target:
            via.append(f"{t['RouteTableId']} -> {target}")
        elif default is not None and str(default.get("GatewayId", "")).startswith("igw-"):
            missing.append(f"{t['RouteTableId']} routes to an internet gateway (the nodes have no public IP)")
        else:
            missing.append(f"{t['RouteTableId']} has no active default route")
    if missing:
        return Outcome(FAIL, "; ".join(missing), "a default route to a NAT gateway in every route table",
                       "add 0.0.0.0/0 via a NAT gateway to the node subnets' route tables")
    return Outcome(PASS, "; ".join(via), "a default route to a NAT gateway in every route table")


def check_vpc_dns(ctx: Context, vpc_id: str) -> Outcome:
    ec2 = ctx.client("ec2")
    off = []
    for attribute, key, flag in (("enableDnsSupport", "EnableDnsSupport", "--enable-dns-support"),
                                 ("enableDnsHostnames", "EnableDnsHostnames", "--enable-dns-hostnames")):
        if not ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute=attribute)[key]["Value"]:
            off.append((attribute, flag))
    if off:
        return Outcome(FAIL, f"{vpc_id}: {', '.join(a for a, _ in off)} off", "DNS resolution and host names on",
                       "; ".join(f"aws ec2 modify-vpc-attribute --vpc-id {vpc_id} {f}" for _, f in off)
                       + " (ParallelCluster's private DNS zone needs both)")
    return Outcome(PASS, f"{vpc_id}: DNS resolution and host names on", "both on")


def check_key_pair(ctx: Context, name: str) -> Outcome:
    try:
        pairs = ctx.client("ec2").describe_key_pairs(KeyNames=[name])["KeyPairs"]
    except ClientError as e:
        if not has_code(e, "InvalidKeyPair.NotFound"):
            raise
        return Outcome(FAIL, f"no key pair {name} in {ctx.region}", "the key pair exists",
                       f"import it (aws ec2 import-key-pair --key-name {name}) or drop ssh_key_name (SSM works)")
    kind = pairs[0].get("KeyType", "?") if pairs else "?"
    os_name = ParallelClusterOrchestrator.of(ctx.spec).parallelcluster.os
    if kind == "rsa" and os_name in NO_RSA_OSES:
        return Outcome(FAIL, f"{name} is an RSA key; {os_name} refuses RSA keys", "an ed25519 key pair",
                       "create an ed25519 key pair (aws ec2 create-key-pair --key-type ed25519)")
    return Outcome(PASS, f"{name} ({kind})", "the key pair exists")


# The tag `pcluster build-image` puts on the AMIs it builds. ParallelCluster's CustomAmiTagValidator only warns when
# it is missing ("If the AMI is indeed not created by pcluster, cluster creation will fail"): the nodes then fail
# their bootstrap, after the head node's wait. A different version is its ERROR.
PCLUSTER_VERSION_TAG = "parallelcluster:version"


def check_custom_ami(ctx: Context, ami: str) -> Outcome:
    want = f"tag {PCLUSTER_VERSION_TAG}={PCLUSTER_VERSION} (an AMI from pcluster build-image)"
    try:
        images = ctx.client("ec2").describe_images(ImageIds=[ami]).get("Images", [])
    except ClientError as e:
        if not has_code(e, "InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidAMIID.Unavailable"):
            raise
        images = []
    if not images:
        return Outcome(FAIL, f"{ami} not found in {ctx.region}", want, "use an AMI of this Region and account")
    tags = {t.get("Key"): t.get("Value") for t in images[0].get("Tags") or []}
    built = tags.get(PCLUSTER_VERSION_TAG)
    owner = images[0].get("OwnerId")
    if built is None and ctx.account is not None and owner != ctx.account:
        # the tags of an AMI shared from another account are not visible here, as ParallelCluster's own validator
        # allows ("You can ignore this warning if the AMI is shared or copied from another pcluster AMI")
        return Outcome(WARN, f"{ami} belongs to account {owner}: its tags are not visible here", want,
                       "make sure it was built with pcluster build-image " + PCLUSTER_VERSION)
    if built is None:
        return Outcome(FAIL, f"{ami} has no {PCLUSTER_VERSION_TAG} tag: not built by ParallelCluster", want,
                       f"build it with pcluster build-image {PCLUSTER_VERSION}; a copy of such an AMI loses its tags "
                       f"(aws ec2 create-tags --resources {ami} --tags Key={PCLUSTER_VERSION_TAG},"
                       f"Value={PCLUSTER_VERSION})")
    if built != PCLUSTER_VERSION:
        return Outcome(FAIL, f"{ami} built by ParallelCluster {built}", want,
                       f"rebuild it with pcluster build-image {PCLUSTER_VERSION}")
    return Outcome(PASS, f"{ami} built by ParallelCluster {built}", want)


def check_static_on_demand(ctx: Context, group: str, static: int, instance_type: str) -> Outcome:
    """Creating the cluster waits for every static node of a queue without a Capacity Block, within the head node's
    wait (docs/parallelcluster.md, "Deadlines"): on-demand GPU capacity that is not there for all of them at once
    rolls the creation back. Nothing here can see EC2's spare capacity, so this is a warning, with the choices."""
    return Outcome(WARN, f"queue {group}: creation waits for {static} on-demand {instance_type} at once",
                   "static nodes backed by a reservation, or dynamic ones",
                   f"for a first deploy without a reservation set orchestrator.parallelcluster.queues.{group}."
                   "min_count: 0 (nodes start for jobs; raise it in an update once capacity is known), or use an "
                   "odcr or capacity-block reservation")

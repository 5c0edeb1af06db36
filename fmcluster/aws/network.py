"""Existing network and bucket: they exist, sit where the spec says, and have room for the nodes."""

from __future__ import annotations

from typing import Any, Optional

from botocore.exceptions import ClientError

from fmcluster.aws.context import Context, has_code, paginate
from fmcluster.aws.results import FAIL, PASS, WARN, Outcome


def _existing(ctx: Context) -> Any:
    existing = ctx.spec.network.existing_vpc
    if existing is None:  # preflight plans these checks only for an existing VPC
        raise ValueError("network checks apply to network.existing_vpc")
    return existing


def check_vpc(ctx: Context) -> Outcome:
    vpc_id = _existing(ctx).vpc_id
    vpcs = paginate(ctx.client("ec2"), "describe_vpcs", "Vpcs", Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    expected = f"{vpc_id} exists in {ctx.region}, available"
    if not vpcs:
        return Outcome(FAIL, f"{vpc_id} not found in {ctx.region}", expected,
                       "check network.existing_vpc.vpc_id, the region and the account")
    vpc = vpcs[0]
    observed = f"{vpc_id} {vpc.get('State')} ({vpc.get('CidrBlock')})"
    if vpc.get("State") != "available":
        return Outcome(WARN, observed, expected, "wait until the VPC is available")
    return Outcome(PASS, observed, expected)


def check_subnets(ctx: Context) -> Outcome:
    existing = _existing(ctx)
    spec, az = ctx.spec, ctx.spec.availability_zone
    need, want = spec.node_ip_addresses, spec.required_ips
    expected = (f"{len(existing.subnet_ids)} subnet(s) in {existing.vpc_id} and {az} with >= {need} free addresses "
                f"(nodes x IP-consuming interfaces; {want} with headroom)")
    subnets = paginate(ctx.client("ec2"), "describe_subnets", "Subnets",
                       Filters=[{"Name": "subnet-id", "Values": list(existing.subnet_ids)}])
    by_id = {s["SubnetId"]: s for s in subnets}
    missing = [s for s in existing.subnet_ids if s not in by_id]
    problems, fix = [], []
    if missing:
        problems.append(f"not found: {', '.join(missing)}")
        fix.append("check network.existing_vpc.subnet_ids, the region and the account")
    wrong_vpc = [s for s, d in by_id.items() if d.get("VpcId") != existing.vpc_id]
    if wrong_vpc:
        problems.append(f"not in {existing.vpc_id}: {', '.join(wrong_vpc)}")
        fix.append(f"list only subnets of {existing.vpc_id}")
    wrong_az = [f"{s} ({d.get('AvailabilityZone')})" for s, d in by_id.items() if d.get("AvailabilityZone") != az]
    if wrong_az:
        problems.append(f"not in {az}: {', '.join(wrong_az)}")
        fix.append(f"EFA needs every node in one AZ: use subnets in {az} or change availability_zone")
    free = sum(int(d.get("AvailableIpAddressCount", 0)) for d in by_id.values() if d.get("AvailabilityZone") == az)
    observed = f"{len(by_id)} of {len(existing.subnet_ids)} found, {free} free addresses in {az}"
    if free < need:
        problems.append(f"{free} free addresses < {need} the nodes take")
        fix.append("free addresses (delete unused ENIs) or use larger subnets")
    if problems:
        return Outcome(FAIL, observed + "; " + "; ".join(problems), expected, "; ".join(fix))
    if free < want:
        return Outcome(WARN, observed + f"; below the {want} recommended with headroom", expected,
                       "add a subnet or free addresses for controllers, endpoints and rolling replacement")
    return Outcome(PASS, observed, expected)


def check_route_tables(ctx: Context) -> Outcome:
    existing = _existing(ctx)
    ids = list(existing.route_table_ids)
    tables = paginate(ctx.client("ec2"), "describe_route_tables", "RouteTables",
                      Filters=[{"Name": "route-table-id", "Values": ids}])
    found = {t["RouteTableId"]: t for t in tables}
    missing = [r for r in ids if r not in found]
    wrong = [r for r, t in found.items() if t.get("VpcId") != existing.vpc_id]
    observed = f"{len(found)} of {len(ids)} route table(s) found"
    expected = f"{', '.join(ids)} in {existing.vpc_id}"
    if missing or wrong:
        detail = "; ".join(x for x in (missing and f"not found: {', '.join(missing)}",
                                       wrong and f"not in {existing.vpc_id}: {', '.join(wrong)}") if x)
        return Outcome(FAIL, f"{observed}; {detail}", expected, "fix network.existing_vpc.route_table_ids")
    return Outcome(PASS, observed, expected)


def existing_bucket_name(spec: Any) -> Optional[str]:
    """The data bucket the spec imports (storage.data_bucket.existing_name), if any."""
    return spec.storage.data_bucket.existing_name  # type: ignore[no-any-return]


def bucket_region(s3: Any, bucket: str) -> Optional[str]:
    """The bucket's Region, or None where S3 says it does not exist (GetBucketLocation's empty answer is us-east-1,
    and its legacy EU is eu-west-1)."""
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as e:
        if has_code(e, "404", "NoSuchBucket", "NotFound"):
            return None
        raise
    loc = s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") or "us-east-1"
    return "eu-west-1" if loc == "EU" else str(loc)


def check_bucket(ctx: Context, bucket: str) -> Outcome:
    expected = f"s3://{bucket} exists, readable, in {ctx.region}"
    loc = bucket_region(ctx.client("s3"), bucket)
    if loc is None:
        return Outcome(FAIL, f"s3://{bucket} does not exist", expected,
                       "create the bucket or fix the bucket name in the spec")
    if loc != ctx.region:
        return Outcome(FAIL, f"s3://{bucket} is in {loc}", expected,
                       "use a bucket in the cluster's Region: the storage stack links it to the stores there")
    return Outcome(PASS, f"s3://{bucket} exists in {loc}", expected)

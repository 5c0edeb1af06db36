"""Preflight for Mountpoint for Amazon S3: an S3 Express One Zone directory bucket lives in one AZ, and only some
AZs offer it. The check maps the GPU AZ's name to its AZ id in this account (AZ names are shuffled per account, ids
are not: EC2 DescribeAvailabilityZones), finds the id in the documented list (express_zones.py), and, where the spec
names the bucket's zone (its name, or express.zone_id), holds the two to each other."""

from __future__ import annotations

from functools import partial
from typing import Any, List

from fmcluster.aws.context import Context, PreflightCheck
from fmcluster.aws.results import FAIL, PASS, Outcome
from fmcluster.platforms.storage.mountpoint_s3 import express_zones

CHECK_ID = "s3-express-zone"


def checks(spec: Any, key: str, section: Any) -> List[PreflightCheck]:
    if section.express is None:
        return []
    return [PreflightCheck(CHECK_ID, f"S3 Express One Zone in {spec.availability_zone}", "ec2",
                           partial(check_express_zone, key=key, named=section.zone_id))]


def _zones(ctx: Context) -> List[dict]:
    if "availability_zones" not in ctx.cache:  # shared with the availability-zone check: one call answers both
        ctx.cache["availability_zones"] = ctx.client("ec2").describe_availability_zones(
            AllAvailabilityZones=True)["AvailabilityZones"]
    return list(ctx.cache["availability_zones"])


def check_express_zone(ctx: Context, key: str, named: Any = None) -> Outcome:
    az, region = ctx.spec.availability_zone, ctx.region
    listed = express_zones.ZONES.get(region)
    where = f"as of {express_zones.READ}, {express_zones.SOURCE}"
    expected = (f"{az}'s AZ id one of {', '.join(listed)} ({where})" if listed
                else f"a Region that offers S3 Express One Zone ({where})")
    zones = _zones(ctx)
    zone = next((z for z in zones if z.get("ZoneName") == az), None)
    if zone is None or not zone.get("ZoneId"):
        return Outcome(FAIL, f"{az} has no AZ id in {region} (DescribeAvailabilityZones)", expected,
                       "fix availability_zone (preflight's availability-zone check lists the zones)")
    zone_id = zone["ZoneId"]
    if listed is None:
        regions = ", ".join(sorted(express_zones.ZONES))
        return Outcome(FAIL, f"{region} is not in the list of Regions with S3 Express One Zone ({regions})", expected,
                       f"use a general purpose bucket (leave storage.{key}.express out) or a Region listed; if AWS "
                       "has added it since, update fmcluster/platforms/storage/mountpoint_s3/express_zones.py")
    if zone_id not in listed:
        offered = sorted(f"{z['ZoneName']} ({z['ZoneId']})" for z in zones if z.get("ZoneId") in listed)
        return Outcome(FAIL, f"{az} is {zone_id} in this account: S3 Express One Zone is not offered there", expected,
                       f"set availability_zone to one of {', '.join(offered) or 'none found'} (the GPU capacity must "
                       f"be there too), or leave storage.{key}.express out")
    if named is not None and named != zone_id:
        return Outcome(FAIL, f"the directory bucket's zone {named} is not {az}, which is {zone_id} in this account",
                       f"storage.{key} in {zone_id}, the GPU AZ",
                       f"use a directory bucket in {zone_id} (its name ends --{zone_id}--x-s3) or set "
                       f"storage.{key}.express.zone_id: {zone_id}")
    return Outcome(PASS, f"{az} is {zone_id}, where S3 Express One Zone is offered"
                   + (f"; the bucket's zone {named} matches" if named else ""), expected)

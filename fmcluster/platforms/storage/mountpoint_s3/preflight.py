"""Preflight for Mountpoint for Amazon S3: an S3 Express One Zone directory bucket lives in one AZ, and only some
AZs offer it. The check maps the GPU AZ's name to its AZ id in this account (AZ names are shuffled per account, ids
are not: EC2 DescribeAvailabilityZones), finds the id in the documented list (`ZONES`), and, where the spec
names the bucket's zone (its name, or express.zone_id), holds the two to each other."""

from __future__ import annotations

from functools import partial
from typing import Any, Dict, List, Tuple

from fmcluster.aws.context import Context, PreflightCheck
from fmcluster.aws.results import FAIL, PASS, Outcome

CHECK_ID = "s3-express-zone"

# Where S3 Express One Zone is offered: the AZ ids of each Region, as the Amazon S3 User Guide's table lists them.
# Data, never fetched at run time; refresh from SOURCE and update READ. A Region or AZ id missing here is refused with
# this list said, so a newly added zone needs the table updated (or `--skip s3-express-zone`).
SOURCE = ("Amazon S3 User Guide, 'S3 Express One Zone Availability Zones and Regions' "
          "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-Endpoints.html)")
# The English page's table as far as the research tool's copy showed it, completed from the same page's translations
# (zh_cn, ja_jp), which list the same seven Regions; the Regional and Zonal endpoints page agrees where it was read.
READ = "2026-12-04"
ZONES: Dict[str, Tuple[str, ...]] = {
    "us-east-1": ("use1-az4", "use1-az5", "use1-az6"),
    "us-east-2": ("use2-az1", "use2-az2"),
    "us-west-2": ("usw2-az1", "usw2-az3", "usw2-az4"),
    "ap-south-1": ("aps1-az1", "aps1-az3"),
    "ap-northeast-1": ("apne1-az1", "apne1-az4"),
    "eu-west-1": ("euw1-az1", "euw1-az3"),
    "eu-north-1": ("eun1-az1", "eun1-az2", "eun1-az3"),
}


def checks(spec: Any, key: str, section: Any) -> List[PreflightCheck]:
    if section is None or section.express is None:
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
    listed = ZONES.get(region)
    where = f"as of {READ}, {SOURCE}"
    expected = (f"{az}'s AZ id one of {', '.join(listed)} ({where})" if listed
                else f"a Region that offers S3 Express One Zone ({where})")
    zones = _zones(ctx)
    zone = next((z for z in zones if z.get("ZoneName") == az), None)
    if zone is None or not zone.get("ZoneId"):
        return Outcome(FAIL, f"{az} has no AZ id in {region} (DescribeAvailabilityZones)", expected,
                       "fix availability_zone (preflight's availability-zone check lists the zones)")
    zone_id = zone["ZoneId"]
    if listed is None:
        regions = ", ".join(sorted(ZONES))
        return Outcome(FAIL, f"{region} is not in the list of Regions with S3 Express One Zone ({regions})", expected,
                       f"use a general purpose bucket (leave storage.{key}.express out) or a Region listed; if AWS "
                       "has added it since, update ZONES in fmcluster/platforms/storage/mountpoint_s3/preflight.py")
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

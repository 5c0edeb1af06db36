"""Preflight of an S3 Express One Zone directory bucket, against moto's EC2: the GPU AZ's name becomes this account's
AZ id, which must be one the S3 User Guide lists for the Region (and the bucket's own zone, where the spec names it);
a lookup that fails is an error, never a pass. moto's us-east-1 maps us-east-1a to use1-az6 and us-east-1b to
use1-az1."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.aws import make_ctx, make_spec, preflight_checks, stub_operation

from fmcluster.aws.context import run_checks
from fmcluster.aws.results import ERROR, FAIL, PASS
from fmcluster.platforms.storage.mountpoint_s3 import preflight

pytestmark = pytest.mark.usefixtures("moto")


def express_spec(az: str = "us-east-1a", region: str = "us-east-1", **section: Any) -> Any:
    return make_spec(region=region, availability_zone=az,
                     storage={"mountpoint_s3": {"read_only": False, "express": {}, **section}})


def run(spec: Any) -> Any:
    checks = [c for c in preflight_checks(spec) if c.id == "s3-express-zone"]
    assert len(checks) == 1
    (result,) = run_checks(make_ctx(spec), checks)
    return result


def test_a_general_purpose_bucket_needs_no_zone_check():
    spec = make_spec(storage={"mountpoint_s3": {}})
    assert not [c for c in preflight_checks(spec) if c.id == "s3-express-zone"]


def test_the_gpu_az_where_express_is_offered_passes():
    result = run(express_spec("us-east-1a"))
    assert result.status == PASS and result.observed.startswith("us-east-1a is use1-az6")


def test_an_az_without_express_fails_naming_the_zones_that_have_it():
    result = run(express_spec("us-east-1b"))
    assert result.status == FAIL
    assert result.observed == "us-east-1b is use1-az1 in this account: S3 Express One Zone is not offered there"
    assert "us-east-1a (use1-az6)" in result.remedy and "us-east-1d (use1-az4)" in result.remedy
    assert "use1-az4, use1-az5, use1-az6" in result.expected and preflight.READ in result.expected


def test_a_region_not_in_the_list_fails_with_the_list():
    result = run(express_spec("eu-west-2a", region="eu-west-2"))
    assert result.status == FAIL and result.observed.startswith("eu-west-2 is not in the list of Regions")
    assert "us-east-1" in result.observed and "mountpoint_s3/preflight.py" in result.remedy


def test_a_named_zone_that_is_not_the_gpu_azs_fails():
    result = run(express_spec("us-east-1a", express={"zone_id": "use1-az4"}))
    assert result.status == FAIL
    assert result.observed == "the directory bucket's zone use1-az4 is not us-east-1a, which is use1-az6 in this account"
    existing = run(express_spec("us-east-1a", bucket="ckpt--use1-az6--x-s3"))
    assert existing.status == PASS and "the bucket's zone use1-az6 matches" in existing.observed


def test_a_failed_lookup_is_an_error_not_a_pass():
    spec = express_spec("us-east-1a")
    ctx = make_ctx(spec)
    stub_operation(ctx.client("ec2"), "DescribeAvailabilityZones",
                   {"Error": {"Code": "InternalError", "Message": "try again"}})
    (result,) = run_checks(ctx, [c for c in preflight_checks(spec) if c.id == "s3-express-zone"])
    assert result.status == ERROR and "InternalError" in result.observed

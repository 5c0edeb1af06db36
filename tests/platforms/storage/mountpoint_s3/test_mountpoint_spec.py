"""`storage.mountpoint_s3`, the section Mountpoint for Amazon S3 declares in its folder and the registry joins into the
spec: what it accepts, and every refusal as one line naming the field (exit 2 through the CLI)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Dict, List

import pytest
import yaml
from helpers import ROOT

from fmcluster import registry
from fmcluster.platforms.storage.mountpoint_s3.settings import MountpointS3, bucket_name, zone_prefix
from fmcluster.spec import SpecError

BASE = yaml.safe_load((ROOT / "examples" / "pcs-p5.yaml").read_text())
AT = "storage.mountpoint_s3"


def spec_with(section: Dict[str, Any], **top: Any) -> Dict[str, Any]:
    storage = {**BASE.get("storage", {}), "mountpoint_s3": section}
    return {**BASE, **top, "storage": {**storage, **top.pop("storage", {})}}


def problems(section: Dict[str, Any], **top: Any) -> List[str]:
    with pytest.raises(SpecError) as e:
        registry.parse_spec(spec_with(section, **top))
    return e.value.problems


def test_an_empty_section_mounts_a_bucket_the_stack_creates_read_only_at_s3():
    s3 = registry.parse_spec(spec_with({})).storage.mountpoint_s3
    assert isinstance(s3, MountpointS3)
    assert (s3.mount_point, s3.read_only, s3.existing_bucket, s3.express, s3.zone_id) == ("/s3", True, None, None, None)


def test_a_spec_without_the_section_has_none():
    assert registry.parse_spec(BASE).storage.mountpoint_s3 is None


@pytest.mark.parametrize("section, expected", [
    ({"read_only": True, "allow_delete": True}, f"{AT}.allow_delete: applies to a writable mount"),
    ({"allow_overwrite": True}, f"{AT}.allow_overwrite: applies to a writable mount"),
    ({"prefix": "/datasets"}, f"{AT}.prefix: '/datasets' must be a relative prefix ending in /"),
    ({"prefix": "datasets"}, f"{AT}.prefix: 'datasets' must be a relative prefix ending in /"),
    ({"mount_point": "/etc"}, f"{AT}.mount_point: /etc is a system directory; use a directory of its own, e.g. /s3"),
    ({"cache_directory": "/var"}, f"{AT}.cache_directory: /var is a system directory; use a directory of its own, "
                                  "e.g. /opt/dlami/nvme/s3-cache"),
    ({"mount_point": "s3"}, f"{AT}.mount_point: 's3' is not an absolute path"),
    ({"max_cache_size_mib": 1024}, f"{AT}.max_cache_size_mib: caps the cache: give cache_directory too"),
    ({"cache_directory": "/s3/cache"}, f"{AT}.cache_directory: /s3/cache is inside the mount /s3"),
    ({"bucket": "Not_A_Bucket"}, f"{AT}.bucket: 'Not_A_Bucket' is not a bucket name"),
    ({"bucket": "data--use1-az4--x-s3"}, f"{AT}.express: data--use1-az4--x-s3 is a directory bucket: add express"),
    ({"bucket": "datasets", "express": {}}, f"{AT}.bucket: express takes a directory bucket"),
    ({"bucket": "data--use1-az4--x-s3", "express": {"zone_id": "use1-az5"}},
     f"{AT}.express.zone_id: use1-az5 is not the bucket's zone use1-az4"),
    ({"bucket": "data--usw2-az1--x-s3", "express": {}}, f"{AT}.bucket: usw2-az1 is not an AZ of us-east-1"),
    ({"express": {"zone_id": "use1az4"}}, f"{AT}.express.zone_id: 'use1az4' is not an AZ id"),
    ({"express": {"zone_id": "euw1-az1"}}, f"{AT}.express.zone_id: euw1-az1 is not an AZ of us-east-1"),
    ({"bucket_key_arn": "arn:aws:kms:us-east-1:111122223333:key/11111111-2222-3333-4444-555555555555"},
     f"{AT}.bucket_key_arn: applies to an existing bucket"),
    ({"bucket": "datasets", "bucket_key_arn": "alias/data"}, f"{AT}.bucket_key_arn: 'alias/data' is not a KMS key ARN"),
    ({"read_only": "sometimes"}, f"{AT}.read_only: "),
    ({"cache": "/nvme"}, f"{AT}.cache: unknown key; allowed keys: mount_point, bucket"),
])
def test_each_refusal_names_its_field(section, expected):
    found = problems(section)
    assert any(p.startswith(expected) for p in found), found


def test_stores_never_share_a_mount_point():
    found = problems({"mount_point": "/fsx/s3"}, storage={"fsx": {}})
    assert found == [f"{AT}.mount_point: /fsx/s3 is or nests storage.fsx's mount point /fsx; give each store its "
                     "own directory"]


def test_a_directory_bucket_needs_its_zone_id_with_an_existing_vpc():
    existing = {"existing_vpc": {"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["subnet-0123456789abcdef0"]}}
    found = problems({"express": {}}, network=existing)
    assert [p for p in found if p.startswith(AT)] == [
        f"{AT}.express.zone_id: required with an existing VPC: the AZ id of us-east-1a in your account (aws ec2 "
        "describe-availability-zones --zone-names us-east-1a)"]
    ok = registry.parse_spec(spec_with({"express": {"zone_id": "use1-az4"}}, network=existing))
    assert ok.storage.mountpoint_s3.zone_id == "use1-az4"


def test_existing_buckets_by_name_or_arn():
    for given, name in (("datasets", "datasets"), ("arn:aws:s3:::datasets", "datasets"),
                        ("arn:aws:s3express:us-east-1:111122223333:bucket/ckpt--use1-az4--x-s3", "ckpt--use1-az4--x-s3")):
        assert bucket_name(given) == name
    s3 = registry.parse_spec(spec_with({"bucket": "arn:aws:s3express:us-east-1:111122223333:bucket/ckpt--use1-az4--x-s3",
                                        "express": {}, "read_only": False})).storage.mountpoint_s3
    assert (s3.existing_bucket, s3.zone_id) == ("ckpt--use1-az4--x-s3", "use1-az4")
    found = problems({"bucket": "arn:aws:s3express:us-west-2:111122223333:bucket/ckpt--use1-az4--x-s3", "express": {}})
    assert f"{AT}.bucket: the directory bucket is in us-west-2, the cluster in us-east-1" in found


def test_zone_ids_start_with_the_regions_short_name():
    assert [zone_prefix(r) for r in ("us-east-1", "us-west-2", "ap-northeast-1", "eu-central-1", "ap-southeast-2")] == [
        "use1", "usw2", "apne1", "euc1", "apse2"]


def test_the_boot_validator_expects_the_fuse_mount_mountpoint_names():
    from fmcluster.profiles import mounts

    spec = registry.parse_spec(spec_with({"mount_point": "/datasets"}))
    assert mounts(spec, spec.node_groups[0]) == [
        {"path": "/datasets", "fstype": "fuse", "source": "mountpoint-s3", "required": True, "read_only": True}]


def test_the_schema_describes_the_section():
    storage = registry.json_schema()["$defs"]["Storage"]["properties"]
    assert "mountpoint_s3" in storage and "Mountpoint" in str(storage["mountpoint_s3"])


def test_the_cli_exits_2_naming_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec_with({"prefix": "/x"})))
    r = subprocess.run([sys.executable, "-m", "fmcluster", "validate", str(path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{AT}.prefix" in r.stdout + r.stderr and "Traceback" not in r.stderr

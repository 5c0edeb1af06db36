"""The storage section: what FSx would refuse half-way into a deploy is refused here, by field."""

from __future__ import annotations

import copy
from typing import Any, Dict

import pytest

from fmcluster.platforms.storage.fsx_lustre.settings import association_bucket, association_s3_path
from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError

BASE: Dict[str, Any] = {
    "name": "fm-test",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}


def with_fsx(**fsx: Any) -> Dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["storage"] = {"fsx": fsx}
    return data


def dras(*entries: Dict[str, Any]) -> Dict[str, Any]:
    return with_fsx(data_repository_associations=list(entries))


def problems(data: Any) -> list:
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    return e.value.problems


def test_fsx_defaults_are_persistent_lz4_backed_up_and_automatic_metadata():
    fsx = parse_spec(with_fsx()).storage.fsx
    assert fsx is not None
    assert (fsx.deployment_type, fsx.storage_capacity_gib, fsx.throughput, fsx.compression) == ("PERSISTENT_2", 4800, 250, "LZ4")
    assert fsx.backup_retention_days == 7 and fsx.metadata_iops is None and fsx.lustre_version == "2.15"
    assert fsx.mount_point == "/fsx" and not fsx.efa


def test_no_fsx_and_a_created_data_bucket_by_default():
    storage = parse_spec(BASE).storage
    assert storage.fsx is None and storage.data_bucket.existing_name is None
    assert storage.data_bucket.lifecycle_rules[0].noncurrent_version_expiration_days == 30


def test_scratch_file_system_has_no_throughput_tier_and_no_backups():
    fsx = parse_spec(with_fsx(deployment_type="SCRATCH_2", storage_capacity_gib=1200)).storage.fsx
    assert fsx is not None and fsx.throughput is None and fsx.backup_retention_days == 0


@pytest.mark.parametrize("capacity", [1200, 2400, 4800, 9600, 100800])
def test_capacities_fsx_accepts(capacity):
    assert parse_spec(with_fsx(storage_capacity_gib=capacity)).storage.fsx.storage_capacity_gib == capacity


@pytest.mark.parametrize(
    "data, path, words",
    [
        (with_fsx(storage_capacity_gib=3000), "storage.fsx.storage_capacity_gib", "multiple of 2400 (nearest: 2400 or 4800)"),
        (with_fsx(storage_capacity_gib=600), "storage.fsx.storage_capacity_gib", "greater than or equal to 1200"),
        (with_fsx(throughput_per_tib=200), "storage.fsx.throughput_per_tib", "125, 250, 500, 1000"),
        (with_fsx(deployment_type="SCRATCH_2", throughput_per_tib=125), "storage.fsx.throughput_per_tib",
         "PERSISTENT_2 only"),
        (with_fsx(deployment_type="PERSISTENT_1"), "storage.fsx.deployment_type", "PERSISTENT_2"),
        (with_fsx(metadata_iops=2000), "storage.fsx.metadata_iops", "1500, 3000, 6000, 12000"),
        (with_fsx(metadata_iops=204000), "storage.fsx.metadata_iops", "up to 192000"),
        (with_fsx(deployment_type="SCRATCH_2", metadata_iops=1500), "storage.fsx.metadata_iops", "PERSISTENT_2 only"),
        (with_fsx(deployment_type="SCRATCH_2", efa=True), "storage.fsx.efa", "PERSISTENT_2"),
        (with_fsx(efa=True, lustre_version="2.12"), "storage.fsx.lustre_version", "Lustre 2.15"),
        (with_fsx(metadata_iops=3000, lustre_version="2.12"), "storage.fsx.metadata_iops", "need Lustre 2.15"),
        (with_fsx(deployment_type="SCRATCH_2", automatic_backup_retention_days=7),
         "storage.fsx.automatic_backup_retention_days", "no backups"),
        (with_fsx(automatic_backup_retention_days=91), "storage.fsx.automatic_backup_retention_days", "less than or equal"),
        (with_fsx(weekly_maintenance_start="8:03:00"), "storage.fsx.weekly_maintenance_start", "d:HH:MM"),
        (with_fsx(daily_backup_start="25:00"), "storage.fsx.daily_backup_start", "HH:MM"),
        (with_fsx(mount_point="/home"), "storage.fsx.mount_point", "system directory"),
        (with_fsx(mount_point="fsx"), "storage.fsx.mount_point", "absolute path"),
        (with_fsx(compression="GZIP"), "storage.fsx.compression", "'LZ4' or 'NONE'"),
        (with_fsx(availability_zone="us-east-1b"), "storage.fsx.availability_zone", "not the GPU nodes' us-east-1a"),
        (with_fsx(size=1), "storage.fsx.size", "unknown key"),
    ],
)
def test_file_system_mistakes_name_their_field(data, path, words):
    found = problems(data)
    assert any(p.startswith(f"{path}:") and words in p for p in found), found


def test_efa_file_system_needs_efa_on_every_gpu_group():
    data = with_fsx(efa=True)
    data["node_groups"][0]["efa"] = False
    found = problems(data)
    assert any(p.startswith("node_groups[0].efa:") and "storage.fsx.efa needs EFA clients" in p for p in found), found
    assert parse_spec(with_fsx(efa=True)).storage.fsx.efa  # p5 has EFA


DATASETS = {"file_system_path": "/datasets", "data_bucket_prefix": "datasets/"}


@pytest.mark.parametrize(
    "data, path, words",
    [
        (dras({"file_system_path": "datasets", "data_bucket_prefix": "d/"}),
         "storage.fsx.data_repository_associations[0].file_system_path", "absolute"),
        (dras({"file_system_path": "/a/../b", "data_bucket_prefix": "d/"}),
         "storage.fsx.data_repository_associations[0].file_system_path", "normalized"),
        (dras(DATASETS, dict(DATASETS, data_bucket_prefix="other/")),
         "storage.fsx.data_repository_associations[1].file_system_path", "already linked by entry 0"),
        (dras(DATASETS, {"file_system_path": "/datasets/imagenet", "data_bucket_prefix": "imagenet/"}),
         "storage.fsx.data_repository_associations[1].file_system_path", "nested"),
        (dras({"file_system_path": "/", "data_bucket_prefix": "all/"}, DATASETS),
         "storage.fsx.data_repository_associations[1].file_system_path", "nested"),
        (dras({"file_system_path": "/d", "repository_path": "https://bucket/d/"}),
         "storage.fsx.data_repository_associations[0].repository_path", "s3://bucket/"),
        (dras({"file_system_path": "/d", "repository_path": "s3://my-bucket/d"}),
         "storage.fsx.data_repository_associations[0].repository_path", "trailing slash"),
        (dras({"file_system_path": "/d", "data_bucket_prefix": "/d"}),
         "storage.fsx.data_repository_associations[0].data_bucket_prefix", "relative prefix ending in /"),
        (dras({"file_system_path": "/d"}),
         "storage.fsx.data_repository_associations[0].repository_path", "exactly one"),
        (dras({"file_system_path": "/d", "data_bucket_prefix": "d/", "repository_path": "s3://my-bucket/d/"}),
         "storage.fsx.data_repository_associations[0].repository_path", "exactly one"),
        (dras(DATASETS, {"file_system_path": "/other", "data_bucket_prefix": "datasets/cifar/"}),
         "storage.fsx.data_repository_associations[1]", "overlaps entry 0"),
        (dras({"file_system_path": "/a", "repository_path": "s3://my-bucket/x/"},
              {"file_system_path": "/b", "repository_path": "s3://my-bucket/x/"}),
         "storage.fsx.data_repository_associations[1]", "overlaps entry 0"),
        (dras({"file_system_path": "/d", "data_bucket_prefix": "d/", "auto_import": ["NEW", "NEW"]}),
         "storage.fsx.data_repository_associations[0].auto_import", "unique"),
        (dras({"file_system_path": "/d", "data_bucket_prefix": "d/", "auto_export": ["CREATED"]}),
         "storage.fsx.data_repository_associations[0].auto_export[0]", "'NEW', 'CHANGED' or 'DELETED'"),
        (dras(*({"file_system_path": f"/d{i}", "data_bucket_prefix": f"d{i}/"} for i in range(9))),
         "storage.fsx.data_repository_associations", "at most 8"),
    ],
)
def test_association_mistakes_name_their_field(data, path, words):
    found = problems(data)
    assert any(p.startswith(f"{path}:") and words in p for p in found), found


def test_overlapping_associations_get_one_line_each_and_a_thousand_get_one_line():
    same = {"file_system_path": "/data", "data_bucket_prefix": "data/"}
    found = problems(dras(*[dict(same) for _ in range(5)]))  # every pair overlaps twice: 20 lines before
    assert [p.split(":")[0] for p in found] == [
        f"storage.fsx.data_repository_associations[{i}]{part}" for i in range(1, 5) for part in (".file_system_path", "")]
    assert all("entry 0" in p for p in found)
    [line] = problems(dras(*[dict(same) for _ in range(1002)]))  # a million lines in 82 s before
    assert line == "storage.fsx.data_repository_associations: 1002 associations; FSx allows at most 8 per file system"


@pytest.mark.parametrize("mount_point, path, seen, instead", [
    ("/fsx", "/fsx/datasets", "/fsx/fsx/datasets", "/datasets"),
    ("/fsx", "/fsx", "/fsx/fsx", "/"),
    ("/lustre/shared", "/lustre/shared/ckpt", "/lustre/shared/lustre/shared/ckpt", "/ckpt"),
])
def test_an_association_path_repeating_the_mount_point_is_refused_with_the_path_nodes_would_see(
        mount_point, path, seen, instead):
    data = with_fsx(mount_point=mount_point,
                    data_repository_associations=[{"file_system_path": path, "data_bucket_prefix": "d/"}])
    found = problems(data)
    field = "storage.fsx.data_repository_associations[0].file_system_path"
    assert any(p.startswith(f"{field}:") and f"would see it at {seen};" in p and f"write {instead} to have it at "
               f"{path}" in p for p in found), found


def test_paths_that_only_share_a_prefix_with_the_mount_point_are_fine_and_nodes_see_them_below_it():
    fsx = parse_spec(with_fsx(data_repository_associations=[
        {"file_system_path": "/fsxdata", "data_bucket_prefix": "d/"}])).storage.fsx
    assert fsx.node_path("/fsxdata") == "/fsx/fsxdata" and fsx.node_path("/") == "/fsx"


def test_association_s3_path_names_the_bucket_really_linked():
    data = dras(DATASETS, {"file_system_path": "/laion", "repository_path": "s3://shared-datasets/laion/"})
    storage = parse_spec(data).storage
    created, other = storage.fsx.data_repository_associations
    assert association_s3_path(storage, created, created_bucket="<new>") == "s3://<new>/datasets/"
    assert association_bucket(storage, other) == "shared-datasets"
    data["storage"]["data_bucket"] = {"existing_name": "acme-datasets"}
    storage = parse_spec(data).storage
    assert association_s3_path(storage, storage.fsx.data_repository_associations[0]) == "s3://acme-datasets/datasets/"


def test_associations_to_other_buckets_and_sibling_paths_are_fine():
    spec = parse_spec(dras(
        DATASETS,
        {"file_system_path": "/datasets2", "repository_path": "s3://shared-datasets/laion/", "auto_import": []},
        {"file_system_path": "/checkpoints", "data_bucket_prefix": "checkpoints/", "auto_export": ["NEW", "CHANGED"]},
    ))
    assert [d.file_system_path for d in spec.storage.fsx.data_repository_associations] == [
        "/datasets", "/datasets2", "/checkpoints"]


def test_existing_bucket_by_name_and_its_lifecycle_stays_its_own():
    data = copy.deepcopy(BASE)
    data["storage"] = {"data_bucket": {"existing_name": "team-ml-data"}}
    assert parse_spec(data).storage.data_bucket.existing_name == "team-ml-data"
    data["storage"]["data_bucket"]["lifecycle_rules"] = [{"expiration_days": 3}]
    assert any(p.startswith("storage.data_bucket.lifecycle_rules:") for p in problems(data))
    data["storage"]["data_bucket"] = {"existing_name": "Not_A_Bucket"}
    assert any(p.startswith("storage.data_bucket.existing_name:") for p in problems(data))


def test_a_lifecycle_rule_must_do_something():
    data = copy.deepcopy(BASE)
    data["storage"] = {"data_bucket": {"lifecycle_rules": [{"prefix": "x/", "abort_incomplete_multipart_upload_days": None}]}}
    assert any(p.startswith("storage.data_bucket.lifecycle_rules[0].prefix:") and "no action" in p for p in problems(data))

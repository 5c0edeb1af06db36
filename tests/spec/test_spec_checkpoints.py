"""The checkpoints section: each tier asks the rest of the spec for what it stands on (FSx, instance NVMe, the S3
export, the memory share), refused by field with what would fix it."""

from __future__ import annotations

import copy
from typing import Any, Dict

import pytest

from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError
from fmcluster.spec.checkpoints import paths

EXPORTING = {"file_system_path": "/checkpoints", "data_bucket_prefix": "checkpoints/", "auto_import": [],
             "auto_export": ["NEW", "CHANGED"]}
BASE: Dict[str, Any] = {
    "name": "fm-test",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
    "storage": {"fsx": {"mount_point": "/fsx", "data_repository_associations": [EXPORTING]}},
}


def with_checkpoints(instance_type: str = "p5.48xlarge", fsx: bool = True, **section: Any) -> Dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["checkpoints"] = section
    data["node_groups"][0]["instance_type"] = instance_type
    if not fsx:
        del data["storage"]
    return data


def problems(data: Any) -> list:
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    return e.value.problems


def test_no_section_by_default_and_a_section_names_its_tier():
    spec = parse_spec(BASE)
    assert spec.checkpoints is None and paths(spec) is None
    assert problems(with_checkpoints()) == ["checkpoints.tier: required"]


def test_fsx_tier_lives_below_the_mount_point_and_reaches_s3_through_an_exporting_association():
    spec = parse_spec(with_checkpoints(tier="fsx"))
    ck = spec.checkpoints
    assert (ck.directory, ck.interval_minutes, ck.keep, ck.export_to_s3) == ("/checkpoints", 30, 3, True)
    assert paths(spec) == type(paths(spec))("fsx", "/fsx/checkpoints", None)


def test_nvme_tier_writes_below_the_declared_tier_path_and_copies_to_fsx():
    got = paths(parse_spec(with_checkpoints(tier="nvme", directory="/checkpoints/run/")))
    assert (got.tier, got.durable, got.local) == ("nvme", "/fsx/checkpoints/run", "/opt/dlami/nvme/checkpoints/run")


def test_a_directory_below_an_exporting_association_is_exported():
    data = with_checkpoints(tier="fsx", directory="/checkpoints/llama")
    assert parse_spec(data).checkpoints.directory == "/checkpoints/llama"
    sibling = with_checkpoints(tier="fsx", directory="/checkpoints-old")  # not below /checkpoints
    assert any(p.startswith("checkpoints.export_to_s3: no data repository association exports /checkpoints-old")
               for p in problems(sibling))


@pytest.mark.parametrize("tier, why", [
    ("fsx", "the checkpoints live on it"),
    ("nvme", "the instance NVMe is lost with its node, so a replaced node restores from the copy on FSx for Lustre")])
def test_file_tiers_need_fsx(tier, why):
    assert problems(with_checkpoints(fsx=False, tier=tier)) == [f"checkpoints.tier: {tier} needs storage.fsx: {why}"]


def test_a_directory_no_association_exports_names_the_entry_to_add_under_storage_fsx():
    (problem,) = problems(with_checkpoints(tier="nvme", directory="/runs"))
    assert problem == ("checkpoints.export_to_s3: no data repository association exports /runs to S3: add "
                       "storage.fsx.data_repository_associations entry {file_system_path: /runs, data_bucket_prefix: "
                       "checkpoints/, auto_import: [], auto_export: [NEW, CHANGED]}, or set export_to_s3: false")


def test_an_association_that_does_not_export_new_files_leaves_checkpoints_off_s3():
    data = with_checkpoints(tier="fsx")
    data["storage"]["fsx"]["data_repository_associations"] = [{**EXPORTING, "auto_export": ["CHANGED"]}]
    (problem,) = problems(data)
    assert problem.startswith("checkpoints.export_to_s3:") and "auto_export: [NEW, CHANGED]" in problem
    data["checkpoints"]["export_to_s3"] = False
    assert parse_spec(data).checkpoints.export_to_s3 is False


def test_nvme_tier_refuses_a_gpu_type_without_instance_store():
    assert any(p.startswith("node_groups[0].instance_type: checkpoints.tier nvme needs instance-store NVMe")
               for p in problems(with_checkpoints("p6e-gb200.36xlarge", tier="nvme")))


@pytest.mark.parametrize("percent, ok", [(19, False), (20, True), (100, True), (101, False)])
def test_memory_percent_takes_the_documented_20_to_100(percent, ok):
    data = with_checkpoints(tier="nvme", memory_percent=percent)
    found = problems(data)
    if ok:
        assert found == ["checkpoints.memory_percent: applies to tier managed only, not nvme; leave it out"]
    else:
        assert any(p.startswith("checkpoints.memory_percent:") and str(percent) in p for p in found), found


@pytest.mark.parametrize("directory", ["checkpoints", "/a/../b", "/a//b", "/a b", "/."])
def test_directory_is_absolute_and_normalized(directory):
    assert any(p.startswith("checkpoints.directory:") for p in problems(with_checkpoints(tier="fsx", directory=directory)))


def test_unknown_tier_names_the_allowed_ones():
    (problem,) = problems(with_checkpoints(tier="ebs"))
    assert problem.startswith("checkpoints.tier:") and "'fsx', 'nvme', 'managed' or 's3'" in problem

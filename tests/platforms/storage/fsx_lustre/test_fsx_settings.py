"""`storage.fsx`, the section FSx for Lustre declares in its folder (settings.py) and the registry joins into the spec
as Mountpoint's is: the spec's own storage model no longer defines it, and specs parse as they did when it did (its
rules' messages are pinned in tests/spec/test_spec_storage.py)."""

from __future__ import annotations

import copy
import re
from typing import Any, Dict

import pytest

import fmcluster.spec.storage as spec_storage
from fmcluster import registry
from fmcluster.platforms.storage import fsx_lustre
from fmcluster.platforms.storage.fsx_lustre.settings import Fsx, fsx_of
from fmcluster.spec import SpecError
from fmcluster.spec.storage import MOUNT_FORMS, Storage, StoreSettings

BASE: Dict[str, Any] = {
    "name": "fm-test",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}


def problems(data: Dict[str, Any]) -> list:
    with pytest.raises(SpecError) as e:
        registry.parse_spec(data)
    return e.value.problems


def test_the_store_declares_the_section_and_the_spec_no_longer_defines_it():
    assert fsx_lustre.STORE.settings is Fsx and issubclass(Fsx, StoreSettings)
    assert Fsx.__module__ == "fmcluster.platforms.storage.fsx_lustre.settings"
    assert [(key, model) for key, model, _ in registry.store_sections()][0] == ("fsx", Fsx)
    assert Fsx.forms == frozenset(MOUNT_FORMS)
    assert "fsx" not in Storage.model_fields
    assert not hasattr(spec_storage, "Fsx") and not hasattr(spec_storage, "DataRepositoryAssociation")
    assert not re.search(r"fsx|lustre", open(spec_storage.__file__).read(), re.IGNORECASE)


def test_a_spec_without_the_section_has_none_and_one_with_it_parses_as_before():
    spec = registry.parse_spec(BASE)
    assert spec.storage.fsx is None and fsx_of(spec.storage) is None
    data = copy.deepcopy(BASE)
    data["storage"] = {"fsx": {"storage_capacity_gib": 2400,
                               "data_repository_associations": [{"file_system_path": "/datasets",
                                                                 "data_bucket_prefix": "datasets/"}]}}
    fsx = registry.parse_spec(data).storage.fsx
    assert isinstance(fsx, Fsx) and fsx_of(registry.parse_spec(data).storage) == fsx
    assert (fsx.deployment_type, fsx.storage_capacity_gib, fsx.throughput, fsx.mount_point, fsx.backup_retention_days) \
        == ("PERSISTENT_2", 2400, 250, "/fsx", 7)
    assert fsx.node_path(fsx.data_repository_associations[0].file_system_path) == "/fsx/datasets"
    # a model built without the section (no store joined): readers see None, not an error
    assert fsx_of(Storage()) is None


def test_keys_are_listed_in_the_order_they_always_were():
    assert problems({**BASE, "storage": {"colour": 1}}) == [
        "storage.colour: unknown key; allowed keys: fsx, data_bucket, mountpoint_s3"]
    assert problems({**BASE, "storage": {"fsx": {"colour": 1}}}) == [
        "storage.fsx.colour: unknown key; allowed keys: deployment_type, storage_capacity_gib, throughput_per_tib, "
        "lustre_version, efa, metadata_iops, compression, mount_point, availability_zone, weekly_maintenance_start, "
        "automatic_backup_retention_days, daily_backup_start, data_repository_associations"]


def test_its_rules_on_the_rest_of_the_spec_keep_their_paths():
    data = copy.deepcopy(BASE)
    data["node_groups"][0]["efa"] = False
    data["storage"] = {"fsx": {"availability_zone": "us-east-1b", "efa": True}}
    assert problems(data) == [
        "storage.fsx.availability_zone: us-east-1b is not the GPU nodes' us-east-1a; cross-AZ Lustre traffic is slow "
        "and billed: leave it out",
        "node_groups[0].efa: storage.fsx.efa needs EFA clients; group gpu (p5.48xlarge) has none: enable EFA there "
        "or set storage.fsx.efa: false"]


def test_the_boot_validator_expects_the_lustre_mount_over_efa_where_both_ends_have_it():
    from fmcluster.profiles import mounts

    data = copy.deepcopy(BASE)
    data["storage"] = {"fsx": {"efa": True, "mount_point": "/lustre"}}
    spec = registry.parse_spec(data)
    assert mounts(spec, spec.node_groups[0]) == [{"path": "/lustre", "fstype": "lustre", "required": True, "efa": True}]


def test_the_schema_describes_the_section():
    schema = registry.json_schema()
    fsx = schema["$defs"]["Storage"]["properties"]["fsx"]
    assert fsx["anyOf"][0] == {"$ref": "#/$defs/Fsx"} and "FSx for Lustre" in fsx["description"]
    assert list(schema["$defs"]["Fsx"]["properties"]) == list(Fsx.model_fields)

"""`checkpoints.tier: s3`: checkpoints written straight through the Mountpoint mount. The tier stands on a writable
`storage.mountpoint_s3`, lands below its mount point, and says what Mountpoint does not do for checkpoints."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
import yaml
from helpers import ROOT

from fmcluster import registry
from fmcluster.spec import SpecError
from fmcluster.spec.checkpoints import paths

BASE = yaml.safe_load((ROOT / "examples" / "pcs-p5.yaml").read_text())
WRITABLE = {"read_only": False, "mount_point": "/s3"}


def spec_with(section: Any, **checkpoints: Any) -> Dict[str, Any]:
    storage = dict(BASE.get("storage", {}))
    if section is not None:
        storage["mountpoint_s3"] = section
    return {**BASE, "storage": storage, "checkpoints": {"tier": "s3", **checkpoints}}


def problems(data: Dict[str, Any]) -> List[str]:
    with pytest.raises(SpecError) as e:
        registry.parse_spec(data)
    return e.value.problems


def test_checkpoints_land_below_the_mount_point():
    spec = registry.parse_spec(spec_with(WRITABLE, directory="/checkpoints/run1"))
    where = paths(spec)
    assert (where.tier, where.durable, where.local) == ("s3", "/s3/checkpoints/run1", None)


def test_the_tier_needs_the_section():
    (problem,) = problems(spec_with(None))
    assert problem == ("checkpoints.tier: s3 needs a writable storage.mountpoint_s3 (read_only: false): the "
                       "checkpoints live on it")


def test_a_read_only_mount_takes_no_checkpoints_and_says_which_field_to_change():
    (problem,) = problems(spec_with({}))
    assert problem.startswith("storage.mountpoint_s3.read_only: checkpoints.tier s3: checkpoints are written through "
                              "the mount: set read_only: false")


def test_the_memory_share_belongs_to_the_managed_tier_only():
    assert "checkpoints.memory_percent: applies to tier managed only, not s3; leave it out" in problems(
        spec_with(WRITABLE, memory_percent=50))


def test_a_general_purpose_bucket_warns_that_dcp_renames_and_express_does_not():
    general = registry.parse_spec(spec_with(WRITABLE)).storage.mountpoint_s3.checkpoint_notes()
    assert any("DCP's FileSystemWriter" in n for n in general)
    express = registry.parse_spec(spec_with({**WRITABLE, "express": {"zone_id": "use1-az4"}}))
    assert not any("DCP" in n for n in express.storage.mountpoint_s3.checkpoint_notes())
    assert any("directory cannot be renamed" in n for n in express.storage.mountpoint_s3.checkpoint_notes())


@pytest.mark.parametrize("kind", ["none", "pcs", "eks"])
def test_every_kind_that_mounts_the_store_honours_the_tier(kind):
    data = yaml.safe_load((ROOT / "examples" / {"none": "existing-vpc.yaml", "pcs": "pcs-p5.yaml",
                                                 "eks": "eks-p6-b200-capacity-block.yaml"}[kind]).read_text())
    data["storage"] = {**data.get("storage", {}), "mountpoint_s3": {**data.get("storage", {}).get("mountpoint_s3", {}),
                                                                    **WRITABLE, "mount_point": "/ckpt-s3"}}
    data["checkpoints"] = {"tier": "s3"}
    assert paths(registry.parse_spec(data)).durable == "/ckpt-s3/checkpoints"


def test_plan_exits_2_naming_the_read_only_field(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "ro.yaml"
    path.write_text(yaml.safe_dump(spec_with({})))
    r = subprocess.run([sys.executable, "-m", "fmcluster", "plan", str(path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "storage.mountpoint_s3.read_only" in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_the_data_buckets_checkpoint_prefix_is_not_the_s3_tiers():
    from fmcluster.spec.data_access import checkpoint_prefix

    data = yaml.safe_load((ROOT / "examples" / "default.yaml").read_text())  # FSx exports /checkpoints
    data["storage"]["mountpoint_s3"] = WRITABLE
    data["checkpoints"] = {"tier": "s3"}
    assert checkpoint_prefix(registry.parse_spec(data)) is None
    data["checkpoints"] = {"tier": "fsx"}
    assert checkpoint_prefix(registry.parse_spec(data)) == "checkpoints/"

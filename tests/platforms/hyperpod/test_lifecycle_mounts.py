"""What HyperPod's nodes are told to mount (platforms/hyperpod/mounts.py): a store with its own lifecycle entry keeps
it (FSx for Lustre's `fsx`), every other store the nodes mount comes in the `mounts` list as its boot form's script
for the HyperPod image (each kind's tests hold that what it renders, the node side accepts)."""

from __future__ import annotations

import pytest
from helpers.storage import fsx_mounts, with_boot_only_store

from fmcluster.platforms.hyperpod.mounts import IMAGES, SLURM_IMAGE, lifecycle_mounts
from fmcluster.platforms.storage import HYPERPOD, Mounts
from fmcluster.platforms.storage.forms import Mount
from fmcluster.registry import stores


def with_s3(mounts: Mounts) -> Mounts:
    return with_boot_only_store(mounts, IMAGES)


def test_a_store_without_a_lifecycle_entry_comes_as_its_boot_script_for_the_image():
    mounts = with_s3(fsx_mounts(efa=True))
    found = lifecycle_mounts(mounts, mounts.mounted_by_nodes(HYPERPOD), image=SLURM_IMAGE)
    assert found["fsx"]["mount_point"] == "/fsx", "FSx keeps its own entry"
    (listed,) = found["mounts"]
    assert (listed["store"], listed["path"], listed["failure"]) == (
        "mountpoint-s3", "/s3", "Mountpoint for Amazon S3 mount failed (s3://datasets/corpus/ on /s3)")
    assert listed["script"] == "install-on-hyperpod-slurm\nmkdir -p /s3 && timeout 120 mount /s3\n", \
        "the node judges a failure: no handler on the line"
    eks = lifecycle_mounts(mounts, mounts.mounted_by_nodes(), image="hyperpod-eks")["mounts"][0]["script"]
    assert eks.startswith("install-on-hyperpod-eks\n")


def test_a_store_hyperpod_mounts_itself_is_in_neither():
    mounts = with_s3(fsx_mounts(efa=False))
    found = lifecycle_mounts(mounts, mounts.mounted_by_nodes(HYPERPOD), image=SLURM_IMAGE)
    assert found["fsx"] is None and [m["store"] for m in found["mounts"]] == ["mountpoint-s3"]


def test_a_store_with_neither_form_is_refused_at_synth():
    bare = Mount(store="bare", id="Bare", path="/bare", fstype="x", source="y")
    with pytest.raises(ValueError, match="store bare has neither a lifecycle form nor a boot form"):
        lifecycle_mounts(Mounts(stores=tuple(stores()), mounts=(bare,)), [bare], image=SLURM_IMAGE)

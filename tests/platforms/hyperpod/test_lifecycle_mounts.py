"""What HyperPod's nodes are told to mount (platforms/hyperpod/mounts.py): a store with its own lifecycle entry keeps
it (FSx for Lustre's `fsx`), every other store the nodes mount comes in the `mounts` list as its boot form's script
for the HyperPod image; and what the synth side renders, the node side accepts (runtime/node_setup/parameters.py)."""

from __future__ import annotations

import copy

import pytest
from helpers.storage import fsx_mounts

from fmcluster.orchestrators.hyperpod_eks.nodes import lifecycle_parameters as eks_parameters
from fmcluster.orchestrators.hyperpod_slurm.construct import lifecycle_parameters as slurm_parameters
from fmcluster.platforms.hyperpod.mounts import IMAGES, SLURM_IMAGE, lifecycle_mounts
from fmcluster.platforms.storage import HYPERPOD, BootMount, Mount, Mounts, NodeClient
from fmcluster.registry import parse_spec, stores
from fmcluster.runtime import contract
from fmcluster.runtime.node_setup import parameters

# a store as Mountpoint's is to HyperPod (its own tests hold its lines): boot lines with a client, no lifecycle form
S3 = Mount(store="mountpoint-s3", id="MountpointS3", path="/s3", fstype="mount-s3", source="s3://datasets/corpus/",
           boot=BootMount(command="mkdir -p /s3 && timeout 120 mount /s3",
                          failure="Mountpoint for Amazon S3 mount failed (s3://datasets/corpus/ on /s3)",
                          client=NodeClient("mount-s3", install={i: f"install-on-{i}\n" for i in IMAGES})))
SLURM = {"name": "hp", "region": "us-east-1", "availability_zone": "us-east-1a",
         "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 1}],
         "orchestrator": {"type": "hyperpod-slurm", "hyperpod": {}}}


def with_s3(mounts: Mounts) -> Mounts:
    return Mounts(stores=mounts.stores, mounts=(*mounts.mounts, S3))


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


def test_what_both_kinds_render_the_node_accepts():
    slurm = slurm_parameters(parse_spec(copy.deepcopy(SLURM)), "us-east-1", with_s3(fsx_mounts()), None)
    assert tuple(slurm) == contract.LIFECYCLE_PARAMETERS_KEYS
    assert all(tuple(m) == contract.MOUNT_KEYS for m in slurm["mounts"])
    assert parameters.validate_params(slurm)["mounts"] == slurm["mounts"]
    eks_spec = {**copy.deepcopy(SLURM), "orchestrator": {
        "type": "hyperpod-eks", "eks": {"kubernetes_version": "1.34", "admins": ["arn:aws:iam::123456789012:role/a"]},
        "task_governance": {"teams": [{"name": "research", "gpus": {"gpu": 8}}]}}}
    eks = eks_parameters(parse_spec(eks_spec), "us-east-1", with_s3(fsx_mounts()), observability=False)
    assert tuple(eks) == contract.EKS_LIFECYCLE_PARAMETERS_KEYS
    assert parameters.validate_eks_params(eks)["mounts"][0]["path"] == "/s3"

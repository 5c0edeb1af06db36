"""Every kind's GPU nodes with instance store have the instance NVMe at the tier's declared path, and the boot
validator is told to find it there: the DLAMI's own mount (none, pcs, HyperPod), ParallelCluster's EphemeralVolume,
and on EKS the bind the boot-validation unit makes onto nodeadm's array. Where each kind's own config says so:
tests/orchestrators/parallelcluster/test_pc_config.py (EphemeralVolume.MountDir) and
tests/orchestrators/eks/test_node_validation.py (the user data's bind, and the validator on the EKS AMI fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fmcluster import images
from fmcluster.platforms.storage.instance_nvme.tier import NVME
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_kinds_validator_looks_for_the_tier_at_its_path(example):
    spec = load_spec(ROOT / "examples" / example)
    for group in spec.node_groups:
        profile = json.loads(spec.orchestrator_kind.node_profile_json(spec, group))
        if NVME.size(group.instance) is None:
            assert profile["instance_store"] is None, group.name
        elif spec.orchestrator_kind.name == "hyperpod-eks":
            # its lifecycle script waits for the tier's path itself and moves containerd and the kubelet there
            assert profile["instance_store"] is None, group.name
        else:
            assert profile["instance_store"] == NVME.path, (example, group.name)


def test_every_image_family_mounts_the_instance_store_at_the_tier_path():
    assert {f.instance_store for f in images.FAMILIES.values()} == {NVME.path}


def test_hyperpods_node_scripts_wait_for_the_tier_path():
    common = (ROOT / "fmcluster/platforms/hyperpod/node/common.sh").read_text()
    assert f'== {NVME.path} ]] && break' in common

"""The node-local NVMe tier as declared: one name, one path, each type's size from the instance catalog."""

from __future__ import annotations

import pytest

from fmcluster import catalog
from fmcluster.platforms.storage.instance_nvme.tier import NVME, NodeSize
from fmcluster.runtime.contract import INSTANCE_NVME_ROOT
from fmcluster.spec.checkpoints import known_tiers


def test_the_tier_is_named_as_the_checkpoint_tier_and_lives_where_the_node_contract_says():
    assert NVME.name == "nvme" and NVME.name in known_tiers()
    assert NVME.path == INSTANCE_NVME_ROOT == "/opt/dlami/nvme"


@pytest.mark.parametrize("itype", ["p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"])
def test_an_eight_disk_type_has_30_4_tb_as_one_raid0(itype):
    # EC2 DescribeInstanceTypes: 8 x 3,800 GB NVMe instance store on these types (the catalog's source)
    assert NVME.size(catalog.get(itype)) == NodeSize(gb=30400, disks=8, layout="RAID0", verified=True)
    assert NVME.size(catalog.get(itype)).bytes == 30.4e12


def test_a_single_disk_is_mounted_as_it_is():
    assert NVME.size(catalog.get("p5.4xlarge")) == NodeSize(gb=3800, disks=1, layout="one disk", verified=True)


def test_types_without_instance_store_have_no_tier_and_an_unknown_size_is_not_made_up():
    assert NVME.size(catalog.get("m5.xlarge")) is None
    assert NVME.size(catalog.get("p6e-gb200.36xlarge")) is None  # nvme_gb unknown to the catalog


def test_directories_go_below_the_tier_path():
    assert NVME.below("/checkpoints/run") == "/opt/dlami/nvme/checkpoints/run"


def test_the_planner_rates_are_bounds_with_their_basis():
    assert NVME.rates_unverified and 0 < NVME.write_mbps_per_disk <= NVME.read_mbps_per_disk < 7900
    assert any("PCI Express Base Specification 4.0" in b for b in NVME.rates_basis)

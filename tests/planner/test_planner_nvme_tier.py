"""`plan` reads the node-local NVMe tier by name: its size per node from the catalog (through the tier's declaration)
for whether `keep` checkpoints fit, and its declared per-disk rates for the write and restore times."""

from __future__ import annotations

import dataclasses

import pytest
from helpers.planner import spec

from fmcluster import catalog
from fmcluster.planner import checkpoint_tier, checkpoints
from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build
from fmcluster.platforms.storage.instance_nvme.tier import NVME

FSX = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 4800, "throughput_per_tib": 250,
       "data_repository_associations": [{"file_system_path": "/checkpoints", "data_bucket_prefix": "checkpoints/",
                                         "auto_import": [], "auto_export": ["NEW", "CHANGED"]}]}


def nvme_checkpoint(model="llama3-8b", nodes=2, keep=3):
    s = spec("p5.48xlarge", nodes, fsx=FSX, checkpoints={"tier": "nvme", "keep": keep})
    return build(s, preset(model), PlanOptions())["jobs"][0]["checkpoint"]


def test_keep_checkpoints_are_held_against_the_tiers_size_per_node():
    ck = nvme_checkpoint()
    (fit,) = [f for f in ck["tier"]["fits"] if f["where"] == "instance NVMe per node"]
    assert fit["have_bytes"] == NVME.size(catalog.get("p5.48xlarge")).bytes == 30.4e12
    assert fit["need_bytes"] == pytest.approx(3 * ck["size"]["value"] / 2) and fit["fits"]


def test_the_write_and_restore_come_from_the_tiers_rates_over_every_disk():
    ck = nvme_checkpoint()
    (nvme,) = [t for t in ck["targets"] if t["target"] == NVME.title]
    size, disks = ck["size"]["value"], 2 * 8
    assert nvme["write"]["value"] == pytest.approx(size / (disks * NVME.write_mbps_per_disk * 1e6))
    assert nvme["restore"]["value"] == pytest.approx(size / (disks * NVME.read_mbps_per_disk * 1e6))
    assert nvme["path"] == "/opt/dlami/nvme" and nvme["gb_per_node"] == 30400 and nvme["unverified"]
    assert ck["tier"]["blocking"]["value"] == pytest.approx(nvme["write"]["value"], rel=1e-4)


def test_a_change_to_the_declaration_reaches_the_plan(monkeypatch):
    """Nothing in the planner keeps its own copy: halve the declared write rate and the write time doubles."""
    before = nvme_checkpoint()
    slower = dataclasses.replace(NVME, write_mbps_per_disk=NVME.write_mbps_per_disk / 2)
    monkeypatch.setattr(checkpoints, "NVME", slower)
    monkeypatch.setattr(checkpoint_tier, "NVME", slower)
    after = nvme_checkpoint()
    write = [t for t in before["targets"] if t["target"] == NVME.title][0]["write"]["value"]
    assert [t for t in after["targets"] if t["target"] == NVME.title][0]["write"]["value"] == pytest.approx(2 * write)


def test_a_node_too_small_for_keep_checkpoints_does_not_fit():
    ck = nvme_checkpoint(keep=1000)  # 1,000 of llama3-8b's 112 GB checkpoints, halved over two nodes: 56 TB each
    (fit,) = [f for f in ck["tier"]["fits"] if f["where"] == "instance NVMe per node"]
    assert fit["need_bytes"] > fit["have_bytes"] == 30.4e12 and not fit["fits"]

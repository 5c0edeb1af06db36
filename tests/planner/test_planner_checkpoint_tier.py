"""`plan` prices the checkpoint tier the spec deploys: what training waits for, what a restart on a replaced node reads
back (FSx, never the lost NVMe), what a failure and an hour of checkpointing cost, and whether `keep` checkpoints fit."""

from __future__ import annotations

import pytest
from helpers.planner import spec

from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build

EXPORTING = {"file_system_path": "/checkpoints", "data_bucket_prefix": "checkpoints/", "auto_import": [],
             "auto_export": ["NEW", "CHANGED"]}
FSX = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 4800, "throughput_per_tib": 250,
       "data_repository_associations": [EXPORTING]}
P5_USD_PER_HOUR = 55.04


def plan(model="llama3-8b", fsx=FSX, **section):
    s = spec("p5.48xlarge", 2, fsx=fsx, checkpoints=section) if section else spec("p5.48xlarge", 2, fsx=fsx)
    return build(s, preset(model), PlanOptions())


def checkpoint(model="llama3-8b", fsx=FSX, **section):
    return plan(model, fsx, **section)["jobs"][0]["checkpoint"]


def job_usd_per_hour(report):
    """What an hour of the job costs: its GPU group and the shared parts (file system, NAT, services)."""
    return sum(ln["usd_per_hour"]["value"] for ln in report["cost"]["lines"] if "usd_per_hour" in ln)


def target(ck, name):
    return next(t for t in ck["targets"] if t["target"] == name)


def test_without_a_section_plan_shows_every_target_and_no_tier():
    ck = checkpoint()
    assert ck["tier"] is None and [t["target"] for t in ck["targets"]] == [
        "instance NVMe", "FSx for Lustre", "S3 (data repository association)", "S3 (Mountpoint)"]
    assert ck["targets"][-1]["comparison"] is True


def test_fsx_tier_blocks_for_the_fsx_write_and_restores_from_fsx():
    report = plan(tier="fsx", interval_minutes=60)
    ck = report["jobs"][0]["checkpoint"]
    tier, fsx = ck["tier"], target(ck, "FSx for Lustre")
    write = fsx["write"]["value"]
    assert tier["blocking"]["value"] == pytest.approx(write, rel=1e-4)
    assert tier["durable_after"]["value"] == pytest.approx(write, rel=1e-4)
    assert tier["overhead"]["value"] == pytest.approx(write / (3600 + write), rel=1e-3)
    lost_h = (1800 + fsx["restore"]["value"]) / 3600  # half an interval on average, then the restore
    assert tier["lost_per_failure"]["value"] == pytest.approx(lost_h, rel=1e-3)
    usd_h = job_usd_per_hour(report)
    assert usd_h > 2 * P5_USD_PER_HOUR, "two p5 instances and the shared parts"
    assert tier["usd_per_failure"]["value"] == pytest.approx(lost_h * usd_h, rel=1e-3)
    assert tier["in_s3_after"]["value"] == pytest.approx(target(ck, "S3 (data repository association)")["write"]["value"])
    assert tier["unverified"] is False


def test_nvme_tier_blocks_for_the_local_write_but_a_replaced_node_restores_from_fsx():
    ck = checkpoint(tier="nvme")
    tier, nvme, fsx = ck["tier"], target(ck, "instance NVMe"), target(ck, "FSx for Lustre")
    assert tier["blocking"]["value"] == pytest.approx(nvme["write"]["value"], rel=1e-4)
    assert tier["durable_after"]["value"] == pytest.approx(nvme["write"]["value"] + fsx["write"]["value"], rel=1e-3)
    assert tier["restore"]["value"] == pytest.approx(fsx["restore"]["value"], rel=1e-4)
    assert tier["restore"]["value"] > nvme["restore"]["value"] and "NVMe is empty" in tier["restore_reads"]
    assert {f["where"] for f in tier["fits"]} == {"FSx", "instance NVMe per node"} and tier["unverified"]


def test_no_export_leaves_checkpoints_on_fsx():
    ck = checkpoint(tier="fsx", export_to_s3=False)
    assert "in_s3_after" not in ck["tier"]
    assert "no association has auto_export" in target(ck, "S3 (data repository association)")["write_reason"]


def test_keep_checkpoints_that_outgrow_fsx_are_flagged():
    small = {**FSX, "storage_capacity_gib": 1200}
    tier = checkpoint(fsx=small, tier="fsx", keep=12)["tier"]  # 12 x 112 GB > 1,200 GiB
    (fsx,) = tier["fits"]
    assert fsx["need_bytes"] == pytest.approx(12 * 14 * 8_030_261_248) and fsx["fits"] is False
    assert checkpoint(fsx=small, tier="fsx", keep=11)["tier"]["fits"][0]["fits"] is True

"""Checkpoints and the data path against NVMe, FSx and S3; cost from dated price data; the cluster figures."""

from __future__ import annotations

import pytest
from helpers.planner import spec

from fmcluster.planner import cost
from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build

FSX = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 4800, "throughput_per_tib": 250,
       "data_repository_associations": [
           {"file_system_path": "/datasets", "data_bucket_prefix": "datasets/"},
           {"file_system_path": "/checkpoints", "data_bucket_prefix": "checkpoints/", "auto_import": [],
            "auto_export": ["NEW", "CHANGED"]}]}


def job(s, model="llama3-8b", **opts):
    return build(s, preset(model), PlanOptions(**opts))["jobs"][0]


def targets(j):
    return {t["target"]: t for t in j["checkpoint"]["targets"]}


def test_checkpoint_size_and_fsx_times():
    j = job(spec("p5.48xlarge", 2, fsx=FSX))
    size = 14 * 8_030_261_248  # 2 bytes bf16 weights + 12 bytes fp32 optimizer state per parameter
    assert j["checkpoint"]["size"]["value"] == pytest.approx(size)
    fsx_bps = 4800 / 1024 * 250e6  # capacity TiB x MB/s per TiB = 1.17 GB/s
    t = targets(j)
    assert t["FSx for Lustre"]["write"]["value"] == pytest.approx(size / fsx_bps, rel=1e-5)
    assert t["FSx for Lustre"]["limited_by"] == "file system throughput"
    # export to S3 reads back what was written, through the same file servers
    assert t["S3 (data repository association)"]["write"]["value"] == pytest.approx(2 * size / fsx_bps, rel=1e-5)
    assert t["S3 (data repository association)"]["exported_from"] == ["/checkpoints"]
    nvme = t["instance NVMe"]
    assert nvme["unverified"] and nvme["write"]["inputs"]["disks_per_node"] == 8
    assert nvme["write"]["value"] < t["FSx for Lustre"]["write"]["value"]


def test_scratch_fsx_uses_the_200_mb_per_tib_baseline_and_no_fsx_is_said():
    scratch = {"deployment_type": "SCRATCH_2", "storage_capacity_gib": 2400}
    j = job(spec("p5.48xlarge", 2, fsx=scratch))
    assert j["data_path"]["fsx"]["value"] == pytest.approx(2400 / 1024 * 200e6)
    assert targets(j)["S3 (data repository association)"]["available"] is False
    none = job(spec("p5.48xlarge", 2))
    assert targets(none)["FSx for Lustre"]["available"] is False
    assert none["data_path"]["delivers"] is None and "not checked" in none["data_path"]["note"]


def test_gb200_has_no_verified_nvme():
    j = job(spec("p6e-gb200.36xlarge", 2), model="llama3-8b")
    assert targets(j)["instance NVMe"]["available"] is False


def test_data_path_is_tokens_at_the_bound_times_bytes_per_token():
    j = job(spec("p5.48xlarge", 2, fsx=FSX), bytes_per_token=4)
    d = j["data_path"]
    assert d["bytes_per_s"]["value"] == pytest.approx(d["tokens_per_s"]["value"] * 4, rel=1e-5)
    assert d["delivers"] is True and d["share_of_fsx"] < 0.01


def test_prices_carry_source_and_date_and_the_2025_cut():
    data = cost.prices()
    assert data["as_of"] and data["source"]["page"].startswith("https://aws.amazon.com/ec2/pricing")
    assert "45%" in data["price_change"]["announcement"]
    assert cost.hourly("p5.48xlarge", "us-east-1") == (55.04, "listed")
    assert cost.hourly("ml.m5.12xlarge", "us-east-1") == (2.304, "listed")
    price, why = cost.hourly("p5e.48xlarge", "us-east-1")
    assert price is None and "Capacity Blocks" in why
    assert cost.hourly("p5en.48xlarge", "us-west-2") == (63.296, "listed")
    price, why = cost.hourly("p5en.48xlarge", "il-central-1")
    assert price == 63.296 and why.startswith("estimate")


def test_hourly_cost_per_group_and_total_with_notes():
    hp = spec("p5.48xlarge", 4, orchestrator={"type": "hyperpod-slurm", "hyperpod": {"login_instance_type": "ml.m5.4xlarge"}})
    c = cost.hourly_cost(hp)
    items = {ln["item"]: ln for ln in c["lines"]}
    assert items["node group gpu"]["usd_per_hour"]["value"] == pytest.approx(4 * 55.04)
    assert "SageMaker HyperPod with Slurm: controller" in items and "SageMaker HyperPod with Slurm: login" in items
    assert any("SageMaker" in n for n in items["node group gpu"]["notes"])
    nat = items["NAT gateway"]["usd_per_hour"]["value"] + items["NAT gateway public IPv4 address"]["usd_per_hour"]["value"]
    assert c["total_usd_per_hour"]["value"] == pytest.approx(4 * 55.04 + 2.304 + 0.768 + nat)
    block = spec("p5.48xlarge", 2, node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": {
        "type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}])
    (reserved, *_) = cost.hourly_cost(block)["lines"]
    assert any("Capacity Blocks" in n for n in reserved["notes"]) and "usd_per_hour" not in reserved


def test_cost_of_tokens_at_the_bound():
    j = job(spec("p5.48xlarge", 2), tokens=1e12)
    tps = j["best"][0]["step"]["tokens_per_s"]["value"]
    hours = 1e12 / tps / 3600
    assert j["tokens"]["hours"]["value"] == pytest.approx(hours, rel=1e-4)
    nat = 0.045 + 0.005  # the new VPC's NAT gateway and its public IPv4 address, shared by every job
    assert j["tokens"]["usd"]["value"] == pytest.approx(hours * (2 * 55.04 + nat), rel=1e-4)
    gb = job(spec("p6e-gb200.36xlarge", 2))
    assert gb["tokens"]["usd"] is None and "p6e-gb200" in gb["tokens"]["usd_reason"]


def test_a_job_pays_for_its_gpu_group_and_the_shared_instances_not_for_other_gpu_groups():
    groups = [{"name": "h100", "instance_type": "p5.48xlarge", "count": 2},
              {"name": "b200", "instance_type": "p6-b200.48xlarge", "count": 4},
              {"name": "prep", "role": "cpu", "instance_type": "c5.18xlarge", "count": 1}]
    s = spec("p5.48xlarge", 2, node_groups=groups,
             orchestrator={"type": "hyperpod-slurm", "hyperpod": {"login_instance_type": "ml.m5.4xlarge"}})
    lines = {ln["item"]: ln["usd_per_hour"]["value"] for ln in cost.hourly_cost(s)["lines"]}
    shared = sum(v for item, v in lines.items() if item not in ("node group h100", "node group b200"))
    assert shared > lines["node group prep"]  # the controller and login nodes are shared too
    j = job(s, tokens=1e12)
    usd = j["tokens"]["usd"]
    assert usd["inputs"]["usd_per_hour"] == pytest.approx(2 * 55.04 + shared)
    assert "node group b200" not in usd["inputs"]["lines"]


def test_cluster_figures_keep_what_plan_always_printed():
    c = build(spec("p5.48xlarge", 4), None, PlanOptions(gradient_gb=10))["cluster"]
    g = c["groups"][0]
    assert g["gpus"] == 32 and g["bf16_dense_pflops"] == pytest.approx(31.65, abs=0.01)
    assert g["hbm_tib"] == pytest.approx(32 * 80 / 1024, abs=0.01)
    assert g["nvlink_domains"] == 4 and g["nvlink_domain_gpus"] == 8
    assert g["efa_gbps_total"] == 4 * 3200 and g["nvme_tb"] == pytest.approx(121.6)
    assert g["allreduce_ms_nvlink_domain"] == pytest.approx(1000 * 2 * 7 / 8 * 10e9 / 450e9, abs=0.01)
    gb = build(spec("p6e-gb200.36xlarge", 18), None, PlanOptions())["cluster"]["groups"][0]
    assert gb["nvlink_domains"] == 1 and gb["allreduce_ms_across_efa"] == 0 and "nvme_gb" in gb["unverified"]
    assert set(c["total"]) >= {"nodes", "gpus", "hbm_tib", "ip_addresses", "ip_addresses_with_headroom"}

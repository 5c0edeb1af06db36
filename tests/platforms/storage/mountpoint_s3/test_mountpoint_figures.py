"""`plan` prices and times the S3 store (Mountpoint for Amazon S3: its folder's figures.py, with facts.py) beside FSx:
every node writes its shard through Mountpoint, bounded by its network and by S3's request rate times Mountpoint's
part size; the checkpoints' month on S3 Standard and S3 Express One Zone; the dataset's stream; and
`checkpoints.tier: s3` as the spec deploys it."""

from __future__ import annotations

import re

import pytest
from helpers.planner import spec

from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build
from fmcluster.planner.text import checkpoint_lines
from fmcluster.platforms.storage.mountpoint_s3.facts import BAND, CALIBRATION, PRICES, RATES
from fmcluster.platforms.storage.mountpoint_s3.figures import node_bytes_per_s

FSX = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 4800, "throughput_per_tib": 250}
WRITABLE = {"read_only": False, "mount_point": "/s3"}
PART = 8306688
GIB = 2**30


def plan(count=2, s3=None, fsx=None, model="llama3-8b", **checkpoints):
    extra = {"checkpoints": checkpoints} if checkpoints else {}
    data_storage = {**({"fsx": fsx} if fsx else {}), **({"mountpoint_s3": s3} if s3 is not None else {})}
    s = spec("p5.48xlarge", count, storage=data_storage, **extra) if data_storage else spec("p5.48xlarge", count,
                                                                                            **extra)
    return build(s, preset(model), PlanOptions())["jobs"][0]


def s3_target(job):
    return next(t for t in job["checkpoint"]["targets"] if t.get("store_tier") == "s3")


def test_mountpoint_and_s3_figures_carry_their_sources():
    facts = RATES
    assert facts["mountpoint"]["part_size_bytes"] == PART
    assert "optimizing-performance.html" in facts["general_purpose"]["sources"][0]
    assert (facts["general_purpose"]["put_per_s_per_prefix"], facts["general_purpose"]["get_per_s_per_prefix"]) == (
        3500, 5500)
    express = facts["express_one_zone"]
    assert (express["put_per_s_per_bucket"], express["get_per_s_per_bucket"]) == (100000, 200000)
    assert "s3-express-performance.html" in express["sources"][0]
    mountpoint = facts["mountpoint"]
    assert (mountpoint["write_bytes_per_s_per_file"], mountpoint["read_bytes_per_s_per_handle"]) == (
        1008 * 2**20, 1417 * 2**20)
    assert any("TROUBLESHOOTING.md" in s and "bounded by CPU" in s for s in mountpoint["sources"])


def mib_s(bytes_per_s):
    return bytes_per_s / 2**20


@pytest.mark.parametrize("run", CALIBRATION, ids=[r["run"] for r in CALIBRATION])
def test_a_node_moves_what_mountpoints_published_runs_measured(run):
    predicted = mib_s(node_bytes_per_s(run["gbps"] / 8 * 1e9, run["handles"],
                                       "PUT" if run["verb"] == "write" else "GET"))
    band = 0.01 if run["use"] == "fit" else BAND
    assert abs(predicted - run["mib_s"]) <= band * run["mib_s"], (predicted, run)


def test_the_calibration_holds_more_runs_than_it_fits_on():
    assert sum(r["use"] == "held" for r in CALIBRATION) > sum(r["use"] == "fit" for r in CALIBRATION)


def test_enough_open_files_fill_the_node_network_and_no_more():
    network = 100 / 8 * 1e9
    assert node_bytes_per_s(network, 16, "GET") == network
    assert node_bytes_per_s(network, 2, "GET") == 2 * RATES["mountpoint"]["read_bytes_per_s_per_handle"]


def test_a_few_p5_nodes_are_bound_by_mountpoints_per_file_rate_one_shard_file_per_gpu():
    t = s3_target(plan(2, WRITABLE))
    clients = t["write"]["inputs"]["client_bytes_per_s"]
    assert clients == pytest.approx(2 * 8 * RATES["mountpoint"]["write_bytes_per_s_per_file"])
    assert clients < 2 * t["write"]["inputs"]["node_network_bytes_per_s"] and clients < 3500 * PART
    assert t["limited_by"] == "Mountpoint's per-file rate (8 files per node)"
    assert t["write"]["value"] == pytest.approx(t["write"]["inputs"]["size"] / clients)
    assert t["write_bound"].startswith("at Mountpoint's measured per-file rate") and t["comparison"] is False


def test_many_nodes_on_one_prefix_are_bound_by_s3s_documented_put_rate_which_is_no_bound():
    t = s3_target(plan(64, WRITABLE, model="llama3-70b"))
    size = t["write"]["inputs"]["size"]
    assert t["limited_by"] == "S3 PUT requests per partitioned prefix (S3's documented floor)"
    assert t["write"]["value"] == pytest.approx(size / (3500 * PART))
    assert t["restore"]["value"] == pytest.approx(size / min(5500 * PART, t["restore"]["inputs"]["client_bytes_per_s"]))
    assert t["write_bound"].startswith("at S3's documented rate, not a bound")
    lines = checkpoint_lines(plan(64, WRITABLE, model="llama3-70b", tier="s3")["checkpoint"])
    assert any(re.search(r"S3 \(Mountpoint\): write ~ ", ln) for ln in lines), lines
    assert any(ln.startswith("  spec's tier s3, every 30 min: blocks ~ ") for ln in lines), lines


def test_a_directory_bucket_takes_more_requests_than_one_prefix():
    express = s3_target(plan(64, {**WRITABLE, "express": {"zone_id": "use1-az4"}}, model="llama3-70b"))
    assert express["target"] == "S3 Express One Zone (Mountpoint)"
    assert express["write"]["inputs"]["requests_per_s"] == 100000
    assert express["restore"]["inputs"]["requests_per_s"] == 200000
    assert express["write"]["value"] < s3_target(plan(64, WRITABLE, model="llama3-70b"))["write"]["value"]


def test_fsx_alone_gets_s3_as_a_comparison_and_a_read_only_store_is_one_too():
    job = plan(2, fsx=FSX)
    assert s3_target(job)["comparison"] is True and job["data_path"]["s3"]["comparison"] is True
    read_only = s3_target(plan(2, {}, fsx=FSX))
    assert read_only["comparison"] is True and "read-only" in read_only["note"]


def test_no_fsx_and_no_store_means_no_s3_line():
    job = plan(2)
    assert not [t for t in job["checkpoint"]["targets"] if t.get("store_tier")]
    assert "s3_cost" not in job["checkpoint"] and "s3" not in job["data_path"]


def test_the_month_of_checkpoints_on_each_class_follows_the_price_data():
    job = plan(2, WRITABLE, tier="s3", keep=2, interval_minutes=60)
    cost = job["checkpoint"]["s3_cost"]
    size = job["checkpoint"]["size"]["value"]
    std, express = cost["classes"]
    table = PRICES
    puts = -(-size // PART)
    assert std["storage_usd"] == pytest.approx(2 * size / GIB * table["standard"]["usd_per_gb_month"])
    assert std["requests_usd"] == pytest.approx(730 * puts * table["standard"]["usd_per_1000_put"] / 1000)
    assert express["upload_usd"] == pytest.approx(730 * size / GIB * table["express_one_zone"]["usd_per_gb_upload"])
    assert std["status"] == "unverified" and express["status"] == "quoted"
    assert cost["fsx"] is None and cost["assumed"] is False


def test_a_region_without_figures_gets_us_east_1s_as_estimates():
    s = spec("p5.48xlarge", 2, region="us-west-2", availability_zone="us-west-2a",
             storage={"mountpoint_s3": WRITABLE})
    classes = build(s, preset("llama3-8b"), PlanOptions())["jobs"][0]["checkpoint"]["s3_cost"]["classes"]
    assert all(any(n.startswith("estimate: us-west-2 not in the data") for n in c["notes"]) for c in classes)


@pytest.mark.parametrize("key", ["usd_per_gb_month", "usd_per_1000_put", "usd_per_1000_get", "usd_per_gb_upload",
                                 "usd_per_gb_retrieval"])
def test_each_express_price_is_the_one_its_faq_row_states(key):
    entry = PRICES["express_one_zone"]
    assert entry["page"] == "https://aws.amazon.com/s3/faqs/" and re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry["read"])
    stated = [float(x) for x in re.findall(r"\$(\d+\.\d+)(?:/1,000)? =", entry["rows"][key])]
    assert stated == [entry[key]], entry["rows"][key]


def test_tier_s3_blocks_for_the_mountpoint_write_and_restores_from_s3():
    job = plan(2, WRITABLE, tier="s3", interval_minutes=60)
    tier, t = job["checkpoint"]["tier"], s3_target(job)
    assert tier["available"] and tier["blocking"]["value"] == pytest.approx(t["write"]["value"])
    assert tier["durable_after"]["value"] == pytest.approx(t["write"]["value"])
    assert tier["restore_reads"] == "S3 (Mountpoint)" and tier["fits"] == [] and tier["unverified"] is True
    assert "in_s3_after" not in tier
    assert any("DCP's FileSystemWriter" in n for n in tier["notes"])


def test_text_and_html_print_the_s3_store(tmp_path):
    from fmcluster.planner.html import checkpoint_table, data_paragraph

    job = plan(2, WRITABLE, fsx=FSX, tier="s3")
    text = "\n".join(checkpoint_lines(job["checkpoint"]))
    assert "S3 (Mountpoint): write ~ " in text and "spec's tier s3" in text
    assert "S3 Express One Zone: $" in text and "FSx for Lustre bills its provisioned capacity" in text
    html = checkpoint_table({"checkpoint": job["checkpoint"]}) + data_paragraph({"data_path": job["data_path"]})
    assert "S3 (Mountpoint)" in html and "S3 Standard: $" in html and "data from S3 through Mountpoint" in html


def test_the_plans_s3_figures_are_the_stores_own_and_todays():
    from fmcluster import registry
    from fmcluster.platforms.storage.mountpoint_s3.figures import Figures

    (store,) = [s for s in registry.stores() if s.spec_key == "mountpoint_s3"]
    assert isinstance(store.figures(), Figures)
    t = s3_target(plan(4, WRITABLE, fsx=FSX, model="llama3-70b"))
    assert t["write"]["value"] == pytest.approx(33.9744103) and t["restore"]["value"] == pytest.approx(21.6200793)

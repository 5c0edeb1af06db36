"""`fmcluster plan` and `fmcluster diagram` say of FSx for Lustre what its store's figures say (its folder's
figures.py, with its rates and price in facts.py): the plan's ``fsx`` keys are the store's key, and the figures are
today's for the example that deploys it."""

from __future__ import annotations

import pytest
from helpers import ROOT

from fmcluster import registry
from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build
from fmcluster.platforms.storage.fsx_lustre.facts import PRICE, RATES
from fmcluster.platforms.storage.fsx_lustre.figures import Figures

EKS = ROOT / "examples" / "eks-p5.yaml"  # PERSISTENT_2, 4,800 GiB at 250 MB/s per TiB, two associations; tier fsx


@pytest.fixture(scope="module")
def report():
    spec = registry.load_spec(EKS)
    return spec, build(spec, preset("llama3-70b"), PlanOptions())


def store():
    (fsx,) = [s for s in registry.stores() if s.spec_key == "fsx"]
    return fsx


def test_the_store_declares_its_figures_and_the_plan_files_them_under_its_key(report):
    spec, plan = report
    figures = store().figures()
    assert isinstance(figures, Figures) and figures.summarised
    assert plan["cluster"]["storage"] == {"fsx": figures.summary(spec, spec.storage.fsx, None)}
    assert plan["cluster"]["formulas"]["fsx.throughput_gbps"] == figures.formulas["throughput_gbps"]


def test_the_summary_is_capacity_times_throughput_per_tib(report):
    summary = report[1]["cluster"]["storage"]["fsx"]
    assert (summary["capacity_tib"], summary["throughput_gbps"], summary["associations"]) == (4.69, 1.17, 2)
    assert summary["throughput_mbps_per_tib"] in RATES["persistent_2_mbps_per_tib"]


def test_checkpoint_times_and_fit_are_todays(report):
    ck = report[1]["jobs"][0]["checkpoint"]
    by = {t["target"]: t for t in ck["targets"]}
    direct, exported = by["FSx for Lustre"], by["S3 (data repository association)"]
    assert direct["write"]["value"] == pytest.approx(842.881614) and direct["limited_by"] == "file system throughput"
    assert exported["write"]["value"] == pytest.approx(2 * direct["write"]["value"])  # write, then the export
    assert ck["tier"]["blocking"]["value"] == direct["write"]["value"]
    assert ck["tier"]["in_s3_after"]["value"] == exported["write"]["value"]
    assert [f["where"] for f in ck["tier"]["fits"]] == ["FSx"] and ck["tier"]["fits"][0]["have_bytes"] == 4800 * 2**30


def test_the_data_path_is_judged_against_its_throughput(report):
    d = report[1]["jobs"][0]["data_path"]
    assert d["fsx"]["value"] == 4800 / 1024 * 250e6 and d["delivers"] is True
    assert d["share_of_fsx"] == pytest.approx(d["bytes_per_s"]["value"] / d["fsx"]["value"])


def test_its_cost_line_and_what_it_bills_by_use_come_from_its_price_data(report):
    cost = report[1]["cost"]
    (line,) = [ln for ln in cost["lines"] if ln["item"] == "FSx for Lustre"]
    assert line["source"] == PRICE["source"] and line["price_status"] == "unknown"
    assert "FSx backups" in cost["not_included"][0]


def test_its_price_page_was_not_found_so_it_is_unpriced_and_says_so():
    assert PRICE["status"] == "unpriced" and "searched" in PRICE
    assert not {"usd_per_hour", "usd_per_gib_month"} & set(PRICE)


def test_the_diagram_draws_it_and_its_associations():
    pytest.importorskip("graphviz")
    from fmcluster.planner.diagram import graph

    dot = graph(registry.load_spec(EKS)).source
    assert '"FSx for Lustre PERSISTENT_2' in dot or "FSx for Lustre PERSISTENT_2" in dot
    assert "fsx -> s3" in dot and "export" in dot


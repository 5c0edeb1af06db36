"""scripts/price_list.py: the On-Demand rate of one product out of an AWS Price List offer file (the format of the
Bulk API's offer files: products with attributes, OnDemand terms with price dimensions), refused when the filters
match none or several; and the Price List figures in the price data (NAT gateway per region, EC2 types outside
us-east-1), each checked against the offer slice or catalog rows it was copied from, with its SKU and date."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from helpers.planner import spec

from fmcluster.planner import cost

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import price_list  # noqa: E402

OFFER = ROOT / "tests" / "fixtures" / "price_list" / "AmazonEKS-us-west-2.json"


def test_the_control_planes_hourly_rate_is_read_with_its_unit_and_date(capsys):
    assert price_list.main([str(OFFER), "--region", "us-west-2", "--usagetype-suffix", "AmazonEKS-Hours:perCluster"]) == 0
    rate = json.loads(capsys.readouterr().out)
    assert rate == {"usd": 0.1, "unit": "Hours", "sku": "AAAAAAAAAAAAAAAA", "description": "$0.10 per hour per cluster",
                    "publication_date": "2026-11-01T00:00:00Z"}


def test_no_match_or_an_ambiguous_one_is_exit_2_saying_what_was_found(capsys):
    assert price_list.main([str(OFFER), "--region", "us-east-1", "--usagetype-suffix", "AmazonEKS-Hours:perCluster"]) == 2
    assert "0 products in us-east-1" in capsys.readouterr().err
    assert price_list.main([str(OFFER), "--region", "us-west-2", "--usagetype-suffix", "Hours:perCluster",
                            "--product-family", "Storage"]) == 2
    assert "in family 'Storage'" in capsys.readouterr().err
    offer = json.loads(OFFER.read_text())
    offer["products"]["BBBBBBBBBBBBBBBB"]["attributes"]["usagetype"] = "USW2-AmazonEKS-Hours:perCluster"
    with pytest.raises(price_list.PriceListError, match="2 products .*: AAAAAAAAAAAAAAAA, BBBBBBBBBBBBBBBB"):
        price_list.on_demand_rate(offer, region="us-west-2", usagetype_suffix="AmazonEKS-Hours:perCluster")


def test_an_unreadable_file_is_exit_2(tmp_path, capsys):
    bad = tmp_path / "offer.json"
    bad.write_text("{not json")
    assert price_list.main([str(bad), "--region", "us-west-2", "--usagetype-suffix", "x"]) == 2
    assert capsys.readouterr().err.startswith(f"price_list: {bad}:")


# The service and instance figures in the price data, each checked against the Price List figure it was copied from:
# the offer files below are slices of real AWS offers (tests/fixtures/price_list/README.md says where each came from).
NAT_OFFER = ROOT / "tests" / "fixtures" / "price_list" / "AmazonEC2-NatGateway.json"
P5_OFFER = ROOT / "tests" / "fixtures" / "price_list" / "AmazonEC2-p5.48xlarge.json"
CATALOG = ROOT / "tests" / "fixtures" / "price_list" / "skypilot-catalog-00148f2a-aws-vms.csv"


def test_the_nat_gateway_hour_is_not_the_regional_nat_gateway_hour(capsys):
    assert price_list.main([str(NAT_OFFER), "--region", "us-east-1", "--usagetype-suffix", "NatGateway-Hours",
                            "--product-family", "NAT Gateway"]) == 0
    assert json.loads(capsys.readouterr().out)["sku"] == "M2YSHUBETB3JX4M4"  # not KVHMMSJX774M3XRN, the regional one
    offer = json.loads(NAT_OFFER.read_text())
    assert price_list.on_demand_rate(offer, region="eu-west-2", usagetype_suffix="NatGateway-Hours")["sku"] == \
        "D8BXG95NJW6MV3B3"
    assert price_list.on_demand_rate(offer, region="eu-west-2", usagetype_suffix="RegionalNatGateway-Hours")["sku"] == \
        "7YHFNHKKMV3Y57SX"


def test_every_nat_gateway_figure_is_the_price_lists_with_its_sku_and_publication_date():
    offer = json.loads(NAT_OFFER.read_text())
    entry = cost.prices()["services"]["nat-gateway"]
    listing = entry["price_list"]
    assert entry["status"] == "listed" and listing["offer"] == offer["offerCode"]
    assert (listing["version"], listing["publication_date"]) == (offer["version"], offer["publicationDate"])
    assert listing["publication_date"] in entry["source"] and listing["version"] in entry["source"]
    assert set(entry["usd_per_hour"]) == set(listing["skus"]) and "us-east-1" in entry["usd_per_hour"]
    for region, usd in entry["usd_per_hour"].items():
        rate = price_list.on_demand_rate(offer, region=region, usagetype_suffix=listing["usagetype"],
                                         product_family=listing["product_family"])
        assert (rate["usd"], rate["unit"], rate["sku"]) == (usd, "Hrs", listing["skus"][region]), region


def test_the_nat_gateway_line_of_a_region_is_its_price_list_figure():
    offer = json.loads(NAT_OFFER.read_text())
    line = {ln["item"]: ln for ln in cost.hourly_cost(spec(region="eu-central-1", availability_zone="eu-central-1a"))
            ["lines"]}["NAT gateway"]
    rate = price_list.on_demand_rate(offer, region="eu-central-1", usagetype_suffix="NatGateway-Hours")
    assert line["usd_per_hour"]["value"] == rate["usd"] == 0.052
    assert line["price_status"] == "listed" and rate["publication_date"] in line["source"]


def test_the_p5_rate_in_two_regions_is_the_price_lists():
    offer = json.loads(P5_OFFER.read_text())
    for region, sku in (("us-east-1", "3D4V8UAYEMB38GU2"), ("us-west-2", "HNW4W6GM8AE2PCQX")):
        rate = price_list.on_demand_rate(offer, region=region, usagetype_suffix="BoxUsage:p5.48xlarge")
        assert rate["sku"] == sku and cost.hourly("p5.48xlarge", region) == (rate["usd"], "listed")
    assert offer["version"] in cost.prices()["regional_source"]["cross_check"]


def test_every_regional_instance_figure_is_the_catalogs_row_and_us_east_1_agrees_with_it():
    rows = {(r["InstanceType"], r["Region"]): float(r["Price"]) for r in csv.DictReader(CATALOG.open())}
    data = cost.prices()
    assert data["regional_source"]["as_of"] == "skypilot-catalog commit 00148f2a"
    regional = {(name, region): usd for region, table in data["regions"].items() if region != "us-east-1"
                for name, usd in table.items()}
    assert regional == {key: usd for key, usd in rows.items() if key[1] != "us-east-1"}
    for (name, region), usd in rows.items():  # two sources, one figure
        if region == "us-east-1":
            assert data["regions"]["us-east-1"][name] == usd, name

"""scripts/price_list.py: the On-Demand rate of one product out of an AWS Price List offer file (the format of the
Bulk API's offer files: products with attributes, OnDemand terms with price dimensions), refused when the filters
match none or several."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

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

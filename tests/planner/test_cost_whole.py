"""The whole cost of an hour: every part the stacks create that bills by the hour, each line saying how its price was
found (listed in the AWS Price List data, quoted, an estimate, your own), reservations at the user's price or left
out of the total, and what is billed by usage printed as not included in the text and the HTML."""

from __future__ import annotations

import pytest
from helpers.planner import spec

from fmcluster.cli import main
from fmcluster.planner import cost
from fmcluster.planner.html import page
from fmcluster.planner.report import PlanOptions, build
from fmcluster.planner.text import render

HOURS_PER_MONTH = 730
# The price data's figures with their dates: EC2 On-Demand from the AWS Price List (as generated into
# aws/karpenter-provider-aws, 2026-07-20), the services' as their sources state them (as of 2026-12-02).
P5_US_EAST_1 = 55.04
FSX_PERSISTENT_2_250 = 0.21  # USD per GiB-month
EKS_CONTROL_PLANE = 0.10


def lines(c):
    return {ln["item"]: ln for ln in c["lines"]}


def test_the_data_dates_every_figure():
    data = cost.prices()
    assert data["as_of"] == "2026-07-20" and data["services"]["as_of"] == "2026-12-02"
    assert data["regions"]["us-east-1"]["p5.48xlarge"] == P5_US_EAST_1
    services = data["services"]
    assert services["fsx-lustre"]["usd_per_gib_month"]["us-east-1"]["PERSISTENT_2"]["250"] == FSX_PERSISTENT_2_250
    assert services["eks-cluster"]["usd_per_hour"] == EKS_CONTROL_PLANE
    for key, entry in services.items():
        if isinstance(entry, dict):
            assert entry["source"] and entry["status"] in ("listed", "quoted", "unverified", "unpriced"), key


def test_the_file_system_is_priced_by_deployment_type_capacity_and_throughput():
    fsx = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 4800, "throughput_per_tib": 250}
    line = lines(cost.hourly_cost(spec(fsx=fsx)))["FSx for Lustre"]
    assert line["usd_per_hour"]["value"] == pytest.approx(4800 * FSX_PERSISTENT_2_250 / HOURS_PER_MONTH)
    assert line["detail"] == "PERSISTENT_2 4800 GiB, 250 MB/s per TiB" and line["price_status"] == "estimate"
    faster = lines(cost.hourly_cost(spec(fsx={**fsx, "throughput_per_tib": 1000})))["FSx for Lustre"]
    assert faster["usd_per_hour"]["value"] > line["usd_per_hour"]["value"]
    scratch = {"deployment_type": "SCRATCH_2", "storage_capacity_gib": 2400}
    assert lines(cost.hourly_cost(spec(fsx=scratch)))["FSx for Lustre"]["usd_per_hour"]["value"] == pytest.approx(
        2400 * 0.14 / HOURS_PER_MONTH)


def test_a_kubernetes_control_plane_and_the_nat_gateway_are_lines_of_their_own():
    eks = spec(orchestrator={"type": "eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"]}})
    items = lines(cost.hourly_cost(eks))
    assert items["EKS control plane (standard support)"]["usd_per_hour"]["value"] == EKS_CONTROL_PLANE
    assert items["NAT gateway"]["usd_per_hour"]["value"] > 0
    no_nat = spec(network={"new_vpc": {"cidr": "10.0.0.0/16", "nat_gateway": False}})
    assert "NAT gateway" not in lines(cost.hourly_cost(no_nat))


def test_another_region_is_an_estimate_on_every_line_it_touches():
    west = spec(region="us-west-2", availability_zone="us-west-2a")
    c = cost.hourly_cost(west)
    assert c["estimate"] and "us-west-2 is not in the price data" in c["region_note"]
    for item in ("node group gpu", "NAT gateway"):
        line = lines(c)[item]
        assert line["price_status"] == "estimate" and any("us-west-2 not in the data" in n for n in line["notes"])


def test_a_capacity_block_is_left_out_of_the_total_until_its_price_is_given():
    block = spec(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
                               "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}])
    c = cost.hourly_cost(block)
    assert c["unpriced"] == ["node group gpu"] and not c["complete"]
    assert any("plan --price gpu=USD" in n for n in lines(c)["node group gpu"]["notes"])
    priced = cost.hourly_cost(block, {"gpu": 31.5})
    line = lines(priced)["node group gpu"]
    assert line["price_status"] == "yours" and line["usd_per_hour"]["value"] == pytest.approx(63.0)
    assert priced["unpriced"] == [] and priced["total_usd_per_hour"]["value"] > 63.0


def test_the_total_never_claims_to_be_complete_and_says_what_is_left_out_in_text_and_html():
    s = spec()
    report = build(s, None, PlanOptions())
    assert report["cost"]["complete"] is False
    text = render(report)
    assert "  not included: usage: NAT gateway data processed" in text
    html = page(report, s)
    assert "<b>Not included</b>" in html and "Managed Grafana users" in html


@pytest.mark.parametrize("given, says", [("gpu", "give GROUP=USD with GROUP one of gpu"),
                                         ("other=3", "give GROUP=USD with GROUP one of gpu"),
                                         ("gpu=-1", "USD per instance-hour, a number greater than 0"),
                                         ("gpu=nan", "USD per instance-hour, a number greater than 0")])
def test_a_bad_price_is_exit_2_naming_the_groups(tmp_path, capsys, given, says):
    f = tmp_path / "c.yaml"
    f.write_text("name: plan\nregion: us-east-1\navailability_zone: us-east-1a\n"
                 "node_groups: [{name: gpu, instance_type: p5.48xlarge, count: 2}]\n")
    assert main(["plan", str(f), "--price", given]) == 2
    assert says in capsys.readouterr().err

"""The whole cost of an hour: every part the stacks create that bills by the hour, each line saying how its price was
found (listed in the AWS Price List data, quoted, an estimate, your own), reservations at the user's price or left
out of the total, and what is billed by usage printed as not included in the text and the HTML."""

from __future__ import annotations

import pytest
import yaml
from helpers import ROOT
from helpers.planner import spec

from fmcluster import catalog
from fmcluster.cli import main
from fmcluster.planner import cost
from fmcluster.planner.html import page
from fmcluster.planner.report import PlanOptions, build
from fmcluster.planner.text import render
from fmcluster.registry import parse_spec

HOURS_PER_MONTH = 730
# The price data's figures with their dates: EC2 On-Demand from the AWS Price List (as generated into
# aws/karpenter-provider-aws, 2026-07-20), the NAT gateway from the AmazonEC2 offer published 2026-09-04, the other
# services' as their sources state them (as of 2026-12-02). tests/test_price_list.py checks them against the offers.
P5_US_EAST_1 = 55.04
NAT_GATEWAY_US_EAST_1 = 0.045
PUBLIC_IPV4 = 0.005
EKS_CONTROL_PLANE, EKS_CONTROL_PLANE_EXTENDED_SUPPORT = 0.10, 0.60
# ap-northeast-1 On-Demand, as SkyPilot's catalog (commit 00148f2a) records the Price List's figures
M5_XLARGE_TOKYO, M5_4XLARGE_TOKYO, M5_12XLARGE_TOKYO = 0.248, 0.992, 2.976
# m7g.2xlarge (Graviton): us-east-1 as generated into karpenter and as the catalog records it; eu-west-2 the catalog's
M7G_2XLARGE_US_EAST_1, M7G_2XLARGE_LONDON = 0.3264, 0.3774


def lines(c):
    return {ln["item"]: ln for ln in c["lines"]}


def test_the_data_dates_every_figure():
    data = cost.prices()
    assert data["as_of"] == "2026-07-20" and data["services"]["as_of"] == "2026-12-03"
    assert data["regions"]["us-east-1"]["p5.48xlarge"] == P5_US_EAST_1
    services = data["services"]
    assert services["eks-cluster"]["usd_per_hour"] == EKS_CONTROL_PLANE
    assert services["eks-cluster-extended-support"]["usd_per_hour"] == EKS_CONTROL_PLANE_EXTENDED_SUPPORT
    assert services["nat-gateway"]["usd_per_hour"]["us-east-1"] == NAT_GATEWAY_US_EAST_1
    assert services["nat-gateway"]["price_list"]["publication_date"] == "2026-09-04T23:11:17Z"
    for key, entry in services.items():
        if isinstance(entry, dict):
            assert entry["source"] and entry["status"] in ("listed", "quoted", "unverified", "unpriced"), key


def test_a_control_plane_on_a_version_past_standard_support_is_priced_at_the_extended_support_rate():
    """Tests plan on 2026-12-02 (tests/conftest.py), the day Kubernetes 1.34, the default, leaves EKS standard support."""
    admins = ["arn:aws:iam::123456789012:role/admin"]
    for version in ("1.33", "1.34"):
        eks = spec(orchestrator={"type": "eks", "eks": {"admins": admins, "kubernetes_version": version}})
        line = lines(cost.hourly_cost(eks))["EKS control plane (extended support)"]
        assert line["usd_per_hour"]["value"] == EKS_CONTROL_PLANE_EXTENDED_SUPPORT
        assert line["detail"].startswith(f"1 cluster, Kubernetes {version}: extended support since 2026-")
        assert "EKS control plane (standard support)" not in lines(cost.hourly_cost(eks))


def test_the_file_system_is_a_line_of_its_own_left_out_of_the_total_with_what_was_searched():
    """No AWS copy of FSx for Lustre's price table was found (docs/planning.md, "Prices not found"): the line names the
    file system, says so, and the total leaves it out rather than using a third party's figure."""
    fsx = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 4800, "throughput_per_tib": 250}
    c = cost.hourly_cost(spec(fsx=fsx))
    line = lines(c)["FSx for Lustre"]
    assert line["detail"] == "PERSISTENT_2 4800 GiB, 250 MB/s per TiB" and line["price_status"] == "unknown"
    assert "usd_per_hour" not in line and "FSx for Lustre" in c["unpriced"]
    assert any("AWS's page not found in the research corpora on 2026-12-03" in n for n in line["notes"])
    scratch = {"deployment_type": "SCRATCH_2", "storage_capacity_gib": 2400}
    assert lines(cost.hourly_cost(spec(fsx=scratch)))["FSx for Lustre"]["detail"] == "SCRATCH_2 2400 GiB"


def test_a_kubernetes_control_plane_and_the_nat_gateway_are_lines_of_their_own():
    eks = spec(orchestrator={"type": "eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"],
                                                      "kubernetes_version": "1.35"}})
    items = lines(cost.hourly_cost(eks))
    assert items["EKS control plane (standard support)"]["usd_per_hour"]["value"] == EKS_CONTROL_PLANE
    nat, ipv4 = items["NAT gateway"], items["NAT gateway public IPv4 address"]
    assert (nat["usd_per_hour"]["value"], nat["price_status"]) == (NAT_GATEWAY_US_EAST_1, "listed")
    assert (ipv4["usd_per_hour"]["value"], ipv4["price_status"]) == (PUBLIC_IPV4, "quoted")
    no_nat = spec(network={"new_vpc": {"cidr": "10.0.0.0/16", "nat_gateway": False}})
    assert not {"NAT gateway", "NAT gateway public IPv4 address"} & set(lines(cost.hourly_cost(no_nat)))


def test_a_region_with_its_own_figures_is_priced_at_them_and_dated_by_their_source():
    west = spec("p5en.48xlarge", 2, region="us-west-2", availability_zone="us-west-2a")
    c = cost.hourly_cost(west)
    gpu, nat = (lines(c)[item] for item in ("node group gpu", "NAT gateway"))
    assert (gpu["usd_per_hour"]["value"], gpu["price_status"]) == (pytest.approx(2 * 63.296), "listed")
    assert (nat["usd_per_hour"]["value"], nat["price_status"]) == (0.045, "listed")
    assert c["as_of"] == "skypilot-catalog commit 00148f2a" and "skypilot-catalog" in c["source"]["data"]
    assert c["region_note"] == ""


def test_a_type_the_region_has_no_figure_for_is_an_estimate_on_its_line():
    eu = spec("p5en.48xlarge", 1, region="eu-west-2", availability_zone="eu-west-2a")
    line = lines(cost.hourly_cost(eu))["node group gpu"]
    assert line["usd_per_hour"]["value"] == 63.296 and line["price_status"] == "estimate"
    assert "estimate: no eu-west-2 price for p5en.48xlarge in the data, us-east-1 price" in line["notes"]


def example_in(name, region):
    data = yaml.safe_load((ROOT / "examples" / name).read_text())
    data.update(region=region, availability_zone=f"{region}a")
    return parse_spec(data)


def by_type(c):
    return {ln["instance_type"]: ln for ln in c["lines"]}


def test_a_login_node_outside_us_east_1_is_priced_at_its_regions_figure_not_estimated_from_us_east_1():
    login = by_type(cost.hourly_cost(example_in("pcs-p5.yaml", "ap-northeast-1")))["m5.xlarge"]
    assert (login["usd_per_hour_each"], login["price_status"]) == (M5_XLARGE_TOKYO, "listed")
    assert cost.prices()["regions"]["us-east-1"]["m5.xlarge"] < M5_XLARGE_TOKYO
    assert not any("estimate" in n for n in login["notes"])


def test_hyperpods_controller_and_login_nodes_take_their_regions_ec2_rate_as_a_proxy_not_sagemakers():
    c = cost.hourly_cost(example_in("hyperpod-slurm-p5.yaml", "ap-northeast-1"))
    controller, login = by_type(c)["ml.m5.12xlarge"], by_type(c)["ml.m5.4xlarge"]
    assert controller["usd_per_hour"]["value"] == M5_12XLARGE_TOKYO
    assert login["usd_per_hour"]["value"] == pytest.approx(2 * M5_4XLARGE_TOKYO)
    for line in (controller, login):  # still not the SageMaker price, but no longer the us-east-1 one
        assert line["price_status"] == "estimate" and cost.prices()["varies"]["hyperpod"] in line["notes"]
        assert not any("us-east-1 price" in n for n in line["notes"])


def test_an_arm64_queue_gets_its_graviton_head_node_priced_not_unknown():
    block = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
    gb200 = [{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 18, "capacity": block}]
    for region, usd in (("us-east-1", M7G_2XLARGE_US_EAST_1), ("eu-west-2", M7G_2XLARGE_LONDON)):
        c = cost.hourly_cost(spec(region=region, availability_zone=f"{region}a", node_groups=gb200,
                                  orchestrator={"type": "parallelcluster"}))
        head = by_type(c)["m7g.2xlarge"]
        assert (head["usd_per_hour_each"], head["price_status"]) == (usd, "listed"), region
        assert head["notes"] == [] and c["unpriced"] == ["node group gb200"]  # only the reservation waits for a price


def test_every_type_a_spec_can_name_has_a_us_east_1_figure_or_says_why_it_has_none():
    data = cost.prices()
    unpriced = [name for name in catalog.all_types()
                if name not in data["regions"]["us-east-1"] and name not in data["no_on_demand_price"]]
    assert unpriced == []


def test_another_region_is_an_estimate_on_every_line_it_touches():
    israel = spec(region="il-central-1", availability_zone="il-central-1a")
    c = cost.hourly_cost(israel)
    assert c["estimate"] and "il-central-1 is not in the price data" in c["region_note"]
    assert c["as_of"] == cost.prices()["as_of"]  # the us-east-1 figures, dated as such
    for item in ("node group gpu", "NAT gateway"):
        line = lines(c)[item]
        assert line["price_status"] == "estimate" and any("il-central-1 not in the data" in n for n in line["notes"])


def test_a_capacity_block_is_left_out_of_the_total_until_its_price_is_given():
    block = spec(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
                               "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}])
    c = cost.hourly_cost(block)
    assert c["unpriced"] == ["node group gpu"] and not c["complete"]
    assert any("plan --price gpu=USD" in n and "reservation fee" in n and "operating system fee" in n
               for n in lines(c)["node group gpu"]["notes"])


def test_a_priced_capacity_block_is_billed_as_aws_bills_it_a_reservation_fee_and_an_os_fee():
    """EC2 user guide, "Capacity Blocks pricing and billing": the reservation fee is charged up front; the operating
    system is paid for while the instances run. The data has no OS fee figure: its line is there, unpriced."""
    block = spec(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
                               "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}])
    priced = cost.hourly_cost(block, {"gpu": 31.5})
    fee, os_fee = lines(priced)["node group gpu"], lines(priced)["node group gpu: operating system fee"]
    assert fee["price_status"] == "yours" and fee["usd_per_hour"]["value"] == pytest.approx(63.0)
    assert fee["usd_per_month"]["value"] == pytest.approx(63.0 * HOURS_PER_MONTH)
    assert any("charges it up front for the whole block" in n for n in fee["notes"])
    assert os_fee["detail"] == "2 x p5.48xlarge while running" and os_fee["price_status"] == "unpriced"
    assert priced["unpriced"] == ["node group gpu: operating system fee"]
    assert priced["total_usd_per_hour"]["value"] > 63.0


def test_every_hourly_figure_has_its_month_beside_it_in_json_text_and_html():
    s = spec()
    report = build(s, None, PlanOptions())
    c = report["cost"]
    assert c["hours_per_month"] == HOURS_PER_MONTH
    assert c["total_usd_per_month"]["value"] == pytest.approx(c["total_usd_per_hour"]["value"] * HOURS_PER_MONTH)
    for line in c["lines"]:
        assert ("usd_per_month" in line) == ("usd_per_hour" in line), line["item"]
    gpu = lines(c)["node group gpu"]
    text = render(report)
    assert f"/h (${gpu['usd_per_month']['value']:,.0f}/month)" in text and " a month of 730 h)" in text
    html = page(report, s)
    assert "USD/month (730 h)" in html and "per month of 730 hours" in html


def test_the_amp_managed_collector_of_a_kubernetes_kind_is_listed_unpriced():
    eks = spec(orchestrator={"type": "eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"],
                                                      "kubernetes_version": "1.35"}})
    line = lines(cost.hourly_cost(eks))["AMP managed collector"]
    assert line["price_status"] == "unknown" and "usd_per_hour" not in line
    assert any("aws.amazon.com/prometheus/pricing/" in n for n in line["notes"])
    quiet = spec(orchestrator=eks.orchestrator.model_dump(), observability={"enabled": False})
    assert "AMP managed collector" not in lines(cost.hourly_cost(quiet))


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

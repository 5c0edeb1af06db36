"""Each service figure the plan uses is held to the sentence of the AWS page it was read from, with the day it was
read; a service with no such page read is unpriced and says what was searched (docs/planning.md, "Prices not
found"): the EKS control plane, the PCS controller, the AMP collector, HyperPod's ml. rates."""

from __future__ import annotations

import re

import pytest

from fmcluster.planner import cost

SERVICES = cost.prices()["services"]
QUOTED_FROM_A_PAGE = [k for k, v in SERVICES.items() if isinstance(v, dict) and "row" in v]


def test_the_control_plane_figures_are_quoted_from_an_aws_page_read_for_them():
    assert set(QUOTED_FROM_A_PAGE) >= {"eks-cluster", "eks-cluster-extended-support"}


@pytest.mark.parametrize("key", QUOTED_FROM_A_PAGE)
def test_each_quoted_figure_is_the_one_its_row_states(key):
    entry = SERVICES[key]
    assert entry["page"].startswith("https://aws.amazon.com/") and re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry["read"])
    stated = [float(x) for x in re.findall(r"\$(\d+(?:\.\d+)?) per cluster per hour", entry["row"])]
    assert stated == [entry["usd_per_hour"]], entry["row"]


@pytest.mark.parametrize("key", ["pcs-controller", "amp-collector"])  # a store's: its folder's tests
def test_a_service_whose_page_was_not_found_is_unpriced_and_says_so(key):
    entry = SERVICES[key]
    assert entry["status"] == "unpriced" and "searched" in entry
    assert not {"usd_per_hour", "usd_per_gib_month"} & set(entry)


def test_hyperpod_instances_are_an_ec2_proxy_that_says_sagemakers_rate_was_not_found():
    assert "the EC2 rate is shown as a proxy" in cost.prices()["varies"]["hyperpod"]
    assert "not found in the research corpora" in cost.prices()["varies"]["hyperpod"]

"""Every kind's billed services have prices: a kind declares the price keys its `billed_services` name
(`OrchestratorTraits.price_keys`), the planner's data holds each, and a key the data lacks is a "no price" line in
`plan`, never a KeyError."""

from __future__ import annotations

from datetime import date

import pytest
from helpers import ROOT

from fmcluster import registry
from fmcluster.planner.cost import hourly_cost, prices
from fmcluster.platforms.kubernetes.support import EXTENDED, STANDARD, control_plane_service
from fmcluster.registry import load_spec
from fmcluster.spec.orchestrator import BilledService, SpecWarning

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


@pytest.mark.parametrize("kind", registry.kinds(), ids=lambda k: k.name)
def test_every_price_key_a_kind_declares_is_in_the_planners_data(kind):
    assert set(kind.price_keys) <= set(prices()["services"]), kind.name


def test_every_example_bills_only_under_its_kinds_declared_keys():
    for path in EXAMPLES:
        spec = load_spec(path)
        kind = spec.orchestrator_kind
        assert {b.key for b in kind.billed_services(spec)} <= kind.price_keys, path.name
    # the Kubernetes control plane's two rates are both declared, whichever support a version is in on a day
    assert {control_plane_service("1.34", on=date(2026, 1, 1)).key,
            control_plane_service("1.34", on=date(2027, 1, 1)).key} == {STANDARD, EXTENDED}
    assert {STANDARD, EXTENDED} <= registry.kind_named("eks").price_keys


def test_a_billed_service_without_a_price_is_said_not_raised(monkeypatch):
    spec = load_spec(ROOT / "examples" / "pcs-p5.yaml")
    kind_type = type(spec.orchestrator_kind)
    monkeypatch.setattr(kind_type, "billed_services", lambda self, spec: [BilledService("no-such-service", "1 thing")])
    cost = hourly_cost(spec)
    (line,) = [ln for ln in cost["lines"] if ln["item"] == "no-such-service"]
    assert line["price_status"] == "unknown" and "usd_per_hour" not in line
    assert any(n.startswith("no price: no-such-service is not in the planner's data") for n in line["notes"])
    assert "no-such-service" in cost["unpriced"] and not cost["complete"]


def test_a_warning_that_prices_an_unknown_service_says_so():
    from fmcluster.cli import spec_warnings

    warning = SpecWarning("orchestrator.x", "costs more", costs_more=("no-such-service", STANDARD))
    assert spec_warnings._cost(warning) == " (no price in the planner's data)"

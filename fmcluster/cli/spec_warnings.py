"""What `fmcluster validate` warns about in a valid spec (exit 0): an instance type with no known EC2 offering in the
Region (spec/regions.py) and the kind's warnings (`spec_warnings`: a Kubernetes version left to the default or in
extended support), with the monthly difference a costlier choice makes, from the planner's price data (730 hours a
month)."""

from __future__ import annotations

from typing import Any, List

from fmcluster.spec.orchestrator import SpecWarning


def warnings_of(spec: Any) -> List[SpecWarning]:
    from fmcluster.spec.regions import offering_warnings

    return offering_warnings(spec) + list(spec.orchestrator_kind.spec_warnings(spec))


def _cost(warning: SpecWarning) -> str:
    if warning.costs_more is None:
        return ""
    from fmcluster.planner.cost import prices  # only when a warning prices something: validate stays light

    services = prices()["services"]
    if any(key not in services for key in warning.costs_more):
        return " (no price in the planner's data)"
    billed, instead = (services[key] for key in warning.costs_more)
    more = billed["usd_per_hour"] - instead["usd_per_hour"]
    return (f" (${billed['usd_per_hour']:.2f} instead of ${instead['usd_per_hour']:.2f} per {billed['per']}-hour: about "
            f"${more * services['hours_per_month']:,.0f} more a month)")


def lines(spec: Any) -> List[str]:
    return [f"warning: {w.path}: {w.message}{_cost(w)}" for w in warnings_of(spec)]

"""What an hour (and a month of 730 hours) of the whole cluster costs, and what N tokens cost at the step bound.

Prices are data (data/prices.json: EC2 On-Demand from the AWS Price List, us-east-1 and other regions; and the
services the stacks create, each with its source and date), never fetched. A region or type the data lacks falls back to
the us-east-1 figure, marked as an estimate on its line. Capacity Blocks and training plans are priced when reserved:
their lines stay unpriced (the On-Demand rate in a note, for reference) unless the user gives the reservation's price
(``plan --price GROUP=USD``). What is billed by usage, per user or per key is listed as not included.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.planner.figures import fig
from fmcluster.planner.service_cost import service_lines
from fmcluster.planner.stores import stores
from fmcluster.runtime.contract import ec2_type

FALLBACK_REGION = "us-east-1"


@lru_cache(maxsize=1)
def prices() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((Path(__file__).parent / "data" / "prices.json").read_text(encoding="utf-8"))
    return data


def hourly(instance_type: str, region: str) -> Tuple[Optional[float], str]:
    """(USD per hour or None, how it was found: listed | estimate from us-east-1 | why none)."""
    name = ec2_type(instance_type)
    data = prices()
    if name in data["no_on_demand_price"]:
        return None, data["no_on_demand_price"][name]
    listed = data["regions"].get(region)
    if listed is not None and name in listed:
        return float(listed[name]), "listed"
    if name in data["regions"][FALLBACK_REGION]:
        missing = f"{region} not in the data" if listed is None else f"no {region} price for {name} in the data"
        return float(data["regions"][FALLBACK_REGION][name]), f"estimate: {missing}, {FALLBACK_REGION} price"
    return None, f"no price for {name} in the data"


def instance_source(region: str) -> Tuple[Dict[str, str], str]:
    """(source, as_of) of the instance prices a spec in `region` gets: us-east-1's, or the regional figures'."""
    data = prices()
    if region != FALLBACK_REGION and region in data["regions"]:
        regional = data["regional_source"]
        return regional, regional["as_of"]
    return data["source"], data["as_of"]


RESERVED = ("capacity-block", "training-plan")  # priced per reservation, not at an hourly list price


def _line(item: str, instance_type: str, count: int, region: str, capacity: str, service: bool,
          gpu_group: Optional[str] = None, yours: Optional[float] = None) -> Dict[str, Any]:
    listed, how = hourly(instance_type, region)
    notes: List[str] = []
    varies = prices()["varies"]
    price: Optional[float] = listed
    if yours is not None:  # the reservation's own price, as the user gave it
        price, status = yours, "yours"
        notes.append(varies["capacity-block-priced"] if capacity == "capacity-block"
                     else "your price for the reservation (plan --price)")
    elif capacity in RESERVED:
        price, status = None, "unpriced"
        reference = f"; On-Demand would be ${listed:,.2f}/h each" if listed is not None else ""
        notes.append(f"{varies[capacity]}: give its price with plan --price {gpu_group or item.split()[-1]}=USD "
                     f"(per instance-hour){reference}")
    else:
        status = "listed" if how == "listed" else ("estimate" if price is not None else "unknown")
        if capacity in varies:
            notes.append(varies[capacity])
    if service and yours is None:  # run by a service (SageMaker HyperPod), which prices its instances itself
        notes.append(varies["hyperpod"])
        if status == "listed":
            status = "estimate"
    if how != "listed" and yours is None:
        notes.append(how)
    line: Dict[str, Any] = {"item": item, "instance_type": instance_type, "count": count, "capacity": capacity,
                            "usd_per_hour_each": price, "price_status": status, "notes": notes, "gpu_group": gpu_group}
    if price is not None:
        line["usd_per_hour"] = fig(price * count, "USD/h", "count x USD/h each", count=count, usd_per_hour_each=price)
    return line


def _os_fee(group: Any) -> Dict[str, Any]:
    """A Capacity Block's second charge: the operating system fee while its instances run (no figure in the data)."""
    return {"item": f"node group {group.name}: operating system fee", "instance_type": None,
            "detail": f"{group.count} x {group.instance_type} while running", "count": group.count,
            "capacity": "capacity-block", "usd_per_hour_each": None, "price_status": "unpriced",
            "notes": [prices()["varies"]["capacity-block-os-fee"]], "gpu_group": group.name if group.role == "gpu"
            else None}


def hourly_cost(spec: Any, reservation_prices: Optional[Dict[str, float]] = None) -> Dict[str, Any]:
    """Every priced part the stacks create, per hour and per month (730 hours); `reservation_prices`: node group ->
    the USD per instance-hour the user pays for its reservation. A Capacity Block is billed as AWS bills it: the
    reservation fee (the user's price, charged up front for the whole block) and the operating system fee while its
    instances run, a line of its own that the data does not price."""
    yours = reservation_prices or {}
    kind = spec.orchestrator_kind
    service = not kind.nodes.in_account
    # An elastic group is priced at count, the size it is planned and deployed at; its ceiling (max_count) is shown
    # beside it, and the quotas preflight checks are for the ceiling.
    lines: List[Dict[str, Any]] = []
    for g in spec.node_groups:
        lines.append(_elastic(_line(f"node group {g.name}", g.instance_type, g.count, spec.region, g.capacity.type,
                                    service, g.name if g.role == "gpu" else None, yours.get(g.name)), g))
        if g.capacity.type == "capacity-block" and g.name in yours:
            lines.append(_os_fee(g))
    for extra in kind.extra_instances(spec):
        lines.append(_line(f"{kind.summary}: {extra.role}", extra.instance_type, extra.count, spec.region, "on-demand",
                           service))
    data = prices()
    lines += service_lines(spec, data["services"])
    hours = data["services"]["hours_per_month"]
    for ln in lines:
        if "usd_per_hour" in ln:
            ln["usd_per_month"] = monthly(ln["usd_per_hour"]["value"], hours)
    known = [ln for ln in lines if "usd_per_hour" in ln]
    total = sum(ln["usd_per_hour"]["value"] for ln in known)
    ceiling = sum(ln["usd_per_hour_at_max"]["value"] if "usd_per_hour_at_max" in ln else ln["usd_per_hour"]["value"]
                  for ln in known)
    fallback = spec.region not in data["regions"]
    source, as_of = instance_source(spec.region)
    unpriced = [ln["item"] for ln in lines if "usd_per_hour" not in ln]
    return {
        "region": spec.region,
        "region_note": f"{spec.region} is not in the price data: {FALLBACK_REGION} prices shown as estimates"
        if fallback else "",
        "lines": lines,
        "total_usd_per_hour": fig(total, "USD/h", "sum of the priced lines", lines=len(known)),
        "max_usd_per_hour": fig(ceiling, "USD/h", "sum of the priced lines with elastic groups at max_count",
                                lines=len(known)),
        "hours_per_month": hours,
        "total_usd_per_month": monthly(total, hours),
        "max_usd_per_month": monthly(ceiling, hours),
        "elastic": any("max_count" in ln for ln in lines),
        "unpriced": unpriced,
        # the total covers everything only when every line is priced and nothing is left out, which usage-billed
        # parts (data transfer, requests, samples) never allow
        "complete": not unpriced and not not_included(spec),
        "estimate": any(ln["price_status"] not in ("listed", "yours") for ln in known),
        "source": source, "as_of": as_of, "services_as_of": data["services"]["as_of"],
        "price_change": data["price_change"]["announcement"], "not_included": not_included(spec),
    }


def not_included(spec: Any) -> List[str]:
    """What the total leaves out; its usage line lists what every registered store bills by use where the data says."""
    out = []
    for item in prices()["not_included"]:
        if isinstance(item, dict):
            usage = [u for x in item["usage"] for u in
                     ([u for _, f, _ in stores(spec) for u in f.unbilled] if x == "STORES" else [x])]
            item = "usage: " + ", ".join(usage)
        out.append(item)
    return out


def monthly(usd_per_hour: float, hours: int) -> Dict[str, Any]:
    """An hourly figure as a month of it (AWS's pricing pages count 730 hours a month)."""
    return fig(usd_per_hour * hours, "USD/month", "USD per hour x hours per month", usd_per_hour=usd_per_hour,
               hours_per_month=hours)


def _elastic(line: Dict[str, Any], group: Any) -> Dict[str, Any]:
    """An elastic group's line gains its range and its price at max_count."""
    if not group.elastic:
        return line
    line["min_count"], line["max_count"] = group.min_size, group.max_size
    line["notes"].append(f"elastic: {group.min_size} to {group.max_size} nodes, priced at count")
    each = line["usd_per_hour_each"]
    if each is not None:
        line["usd_per_hour_at_max"] = fig(each * group.max_size, "USD/h", "max_count x On-Demand USD/h",
                                          max_count=group.max_size, usd_per_hour_each=each)
    return line


def priced_for_job(cost: Dict[str, Any], group: str) -> List[Dict[str, Any]]:
    """The lines a job on GPU group `group` pays for: its group and what every job shares (CPU groups, controllers,
    login and system nodes); other GPU groups are left to their own jobs."""
    return [ln for ln in cost["lines"] if ln.get("gpu_group") in (None, group)]


def token_cost(tokens: float, tokens_per_s: float, lines: List[Dict[str, Any]]) -> Dict[str, Any]:
    hours = tokens / tokens_per_s / 3600 if tokens_per_s > 0 else float("inf")
    usd_per_hour = sum(ln["usd_per_hour"]["value"] for ln in lines if "usd_per_hour" in ln)
    out: Dict[str, Any] = {
        "hours": fig(hours, "h", "tokens / tokens per second at the step bound / 3600", tokens=tokens,
                     tokens_per_s=tokens_per_s),
        "usd": fig(hours * usd_per_hour, "USD", "hours x USD/h of the job's GPU group and the shared parts (CPU "
                   "groups, controllers, file system, services); other GPU groups are left out", hours=hours,
                   usd_per_hour=usd_per_hour, lines=[ln["item"] for ln in lines]),
    }
    instances = sorted({ln["instance_type"] + (" (a reservation: plan --price GROUP=USD)" if ln["capacity"] in RESERVED
                                               else "")
                        for ln in lines if "usd_per_hour" not in ln and ln["instance_type"]})
    services = [ln["item"] for ln in lines if "usd_per_hour" not in ln and not ln["instance_type"]]
    if instances:
        out["usd"] = None
        out["usd_reason"] = f"no price for {', '.join(instances)}"
    elif services:  # the instances dominate; an unpriced service is said, not allowed to hide the rest
        out["usd_excludes"] = services
    return out

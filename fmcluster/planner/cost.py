"""What an hour costs, and what N tokens cost at the step bound.

Prices are data (data/prices.json: EC2 On-Demand, with their source and date), never
fetched. A region the data lacks falls back to us-east-1, marked as an estimate. Capacity
Blocks and training plans are priced when reserved: the On-Demand rate is shown beside a
note that their price varies.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.planner.figures import fig
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
    listed = data["regions"].get(region, {})
    if name in listed:
        return float(listed[name]), "listed"
    if name in data["regions"][FALLBACK_REGION]:
        return float(data["regions"][FALLBACK_REGION][name]), f"estimate: {region} not in the data, {FALLBACK_REGION} price"
    return None, f"no price for {name} in the data"


def _line(item: str, instance_type: str, count: int, region: str, capacity: str, service: bool,
          gpu_group: Optional[str] = None) -> Dict[str, Any]:
    price, how = hourly(instance_type, region)
    notes: List[str] = []
    varies = prices()["varies"]
    if capacity in varies:
        notes.append(varies[capacity])
    if service:  # run by a service (SageMaker HyperPod), which prices its instances itself
        notes.append(varies["hyperpod"])
    if how != "listed":
        notes.append(how)
    line: Dict[str, Any] = {"item": item, "instance_type": instance_type, "count": count, "capacity": capacity,
                            "usd_per_hour_each": price, "price_status": "listed" if how == "listed" else
                            ("estimate" if price is not None else "unknown"), "notes": notes,
                            "gpu_group": gpu_group}
    if price is not None:
        line["usd_per_hour"] = fig(price * count, "USD/h", "count x On-Demand USD/h", count=count, usd_per_hour_each=price)
    return line


def hourly_cost(spec: Any) -> Dict[str, Any]:
    kind = spec.orchestrator_kind
    service = not kind.instances_in_account
    # An elastic group is priced at count, the size it is planned and deployed at; its ceiling (max_count) is shown
    # beside it, and the quotas preflight checks are for the ceiling.
    lines = [_elastic(_line(f"node group {g.name}", g.instance_type, g.count, spec.region, g.capacity.type, service,
                            g.name if g.role == "gpu" else None), g) for g in spec.node_groups]
    for extra in kind.extra_instances(spec):
        lines.append(_line(f"{kind.summary}: {extra.role}", extra.instance_type, extra.count, spec.region, "on-demand",
                           service))
    known = [ln for ln in lines if "usd_per_hour" in ln]
    total = sum(ln["usd_per_hour"]["value"] for ln in known)
    ceiling = sum(ln["usd_per_hour_at_max"]["value"] if "usd_per_hour_at_max" in ln else ln["usd_per_hour"]["value"]
                  for ln in known)
    data = prices()
    fallback = spec.region not in data["regions"]
    return {
        "region": spec.region,
        "region_note": f"{spec.region} is not in the price data: {FALLBACK_REGION} prices shown as estimates"
        if fallback else "",
        "lines": lines,
        "total_usd_per_hour": fig(total, "USD/h", "sum of the priced lines", lines=len(known)),
        "max_usd_per_hour": fig(ceiling, "USD/h", "sum of the priced lines with elastic groups at max_count",
                                lines=len(known)),
        "elastic": any("max_count" in ln for ln in lines),
        "complete": len(known) == len(lines),
        "estimate": any(ln["price_status"] != "listed" for ln in lines),
        "source": data["source"], "as_of": data["as_of"], "price_change": data["price_change"]["announcement"],
        "not_included": data["not_included"],
    }


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
        "usd": fig(hours * usd_per_hour, "USD", "hours x USD/h of the job's GPU group and the shared instances (CPU "
                   "groups, controllers); other GPU groups are left out", hours=hours, usd_per_hour=usd_per_hour,
                   lines=[ln["item"] for ln in lines]),
    }
    unpriced = sorted({ln["instance_type"] for ln in lines if "usd_per_hour" not in ln})
    if unpriced:
        out["usd"] = None
        out["usd_reason"] = f"no On-Demand price for {', '.join(unpriced)}"
    return out

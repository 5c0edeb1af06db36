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


def _line(item: str, instance_type: str, count: int, region: str, capacity: str, service: bool) -> Dict[str, Any]:
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
                            ("estimate" if price is not None else "unknown"), "notes": notes}
    if price is not None:
        line["usd_per_hour"] = fig(price * count, "USD/h", "count x On-Demand USD/h", count=count, usd_per_hour_each=price)
    return line


def hourly_cost(spec: Any) -> Dict[str, Any]:
    kind = spec.orchestrator_kind
    service = not kind.instances_in_account
    lines = [_line(f"node group {g.name}", g.instance_type, g.count, spec.region, g.capacity.type, service)
             for g in spec.node_groups]
    for extra in kind.extra_instances(spec):
        lines.append(_line(f"{kind.summary}: {extra.role}", extra.instance_type, extra.count, spec.region, "on-demand",
                           service))
    known = [ln for ln in lines if "usd_per_hour" in ln]
    total = sum(ln["usd_per_hour"]["value"] for ln in known)
    data = prices()
    fallback = spec.region not in data["regions"]
    return {
        "region": spec.region,
        "region_note": f"{spec.region} is not in the price data: {FALLBACK_REGION} prices shown as estimates"
        if fallback else "",
        "lines": lines,
        "total_usd_per_hour": fig(total, "USD/h", "sum of the priced lines", lines=len(known)),
        "complete": len(known) == len(lines),
        "estimate": any(ln["price_status"] != "listed" for ln in lines),
        "source": data["source"], "as_of": data["as_of"], "price_change": data["price_change"]["announcement"],
        "not_included": data["not_included"],
    }


def token_cost(tokens: float, tokens_per_s: float, usd_per_hour: float) -> Dict[str, Any]:
    hours = tokens / tokens_per_s / 3600 if tokens_per_s > 0 else float("inf")
    return {
        "hours": fig(hours, "h", "tokens / tokens per second at the step bound / 3600", tokens=tokens,
                     tokens_per_s=tokens_per_s),
        "usd": fig(hours * usd_per_hour, "USD", "hours x cluster USD/h (the whole cluster runs while the job trains)",
                   hours=hours, usd_per_hour=usd_per_hour),
    }

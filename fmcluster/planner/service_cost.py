"""What the stacks create besides instances, per hour: the NAT gateway and its public IPv4 address, each shared store
the spec configures (its figures' `charges`, priced from its own data), and the services a kind bills by the hour
(`OrchestratorTraits.billed_services`: the EKS control plane, the PCS controller). Prices are data (data/prices.json,
``services``), each with its source and how far it is checked; a region the data lacks gets the us-east-1 figure,
marked as an estimate on its line."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from fmcluster.planner.figures import fig
from fmcluster.planner.stores import KIT, stores
from fmcluster.planner.stores import regional as _regional


def service_line(item: str, detail: str, usd_per_hour: Optional[float], entry: Dict[str, Any],
                 notes: List[str], formula: str, **inputs: Any) -> Dict[str, Any]:
    status = entry["status"]
    if usd_per_hour is None:
        price_status = "unknown"
    elif any(n.startswith("estimate") for n in notes) or status == "unverified":
        price_status = "estimate"
    else:
        price_status = "listed" if status == "listed" else "quoted"
    if status == "unverified":
        notes = [*notes, "figure not checked against the AWS Price List (docs/planning.md, Cost)"]
    if entry.get("usage"):
        notes = [*notes, f"plus usage: {entry['usage']}"]
    line: Dict[str, Any] = {"item": item, "detail": detail, "instance_type": None, "count": inputs.get("count", 1),
                            "capacity": "service", "usd_per_hour_each": usd_per_hour, "price_status": price_status,
                            "notes": [*notes, entry["source"]] if usd_per_hour is None else notes,
                            "gpu_group": None, "source": entry["source"]}
    if usd_per_hour is not None:
        line["usd_per_hour"] = fig(usd_per_hour * inputs.get("count", 1), "USD/h", formula, **inputs)
    return line


def service_lines(spec: Any, services: Dict[str, Any]) -> List[Dict[str, Any]]:
    hours = services["hours_per_month"]
    lines: List[Dict[str, Any]] = []
    new_vpc = spec.network.new_vpc
    if new_vpc is not None and new_vpc.nat_gateway:
        entry = services["nat-gateway"]
        price, why = _regional(entry["usd_per_hour"], spec.region)
        lines.append(service_line(entry["item"], "1 gateway", price, entry, [why] if why else [],
                                  "count x USD per gateway-hour", count=1, usd_per_hour_each=price))
        ipv4 = services["public-ipv4"]  # a NAT gateway holds one Elastic IP, billed like any public IPv4 address
        lines.append(service_line(ipv4["item"], "1 Elastic IP", ipv4["usd_per_hour"], ipv4, [],
                                  "count x USD per address-hour", count=1, usd_per_hour_each=ipv4["usd_per_hour"]))
    for _, figures, section in stores(spec):
        if section is None:
            continue
        for c in figures.charges(spec, section, KIT):
            monthly = c["usd_per_month"]
            lines.append(service_line(c["item"], c["detail"], None if monthly is None else monthly / hours, c["entry"],
                                      c["notes"], f"{c['formula']} / hours per month", **c["inputs"],
                                      hours_per_month=hours))
    for billed in spec.orchestrator_kind.billed_services(spec):
        entry = services.get(billed.key)
        if entry is None:  # a kind's price the data lacks: said, never a crash (a test holds the built-in kinds)
            lines.append(service_line(billed.key, billed.detail, None, {"status": "unknown",
                                                                                 "source": "no source"},
                                      [f"no price: {billed.key} is not in the planner's data "
                                       "(fmcluster/planner/data/prices.json, services)"], "", count=billed.count))
            continue
        rate = entry.get("usd_per_hour")
        price, why = (rate, None) if not isinstance(rate, dict) else _regional(rate, spec.region)
        notes = [why] if why else []
        if price is None and "searched" in entry:
            notes.append(entry["searched"])
        lines.append(service_line(entry["item"], billed.detail, price, entry, notes,
                                  f"count x USD per {entry['per']}-hour", count=billed.count, usd_per_hour_each=price))
    return lines

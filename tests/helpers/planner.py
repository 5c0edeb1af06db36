"""Shared helpers of the planner tests: small specs and hardware views."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from fmcluster.planner.frameworks import DEEPSPEED
from fmcluster.planner.hardware import Hardware, of_group
from fmcluster.registry import parse_spec
from fmcluster.spec import ClusterSpec

ZERO = {s.key: s for s in DEEPSPEED.shardings}  # the ZeRO paper's accounting: 2 + 2 + 12 bytes, bf16 gradients


def spec(instance_type: str = "p5.48xlarge", count: int = 2, fsx: Optional[Dict[str, Any]] = None,
         **extra: Any) -> ClusterSpec:
    data: Dict[str, Any] = {"name": "plan", "region": "us-east-1", "availability_zone": "us-east-1a",
                            "node_groups": [{"name": "gpu", "instance_type": instance_type, "count": count}]}
    if fsx is not None:
        data["storage"] = {"fsx": fsx}
    data.update(extra)
    return parse_spec(data)


def hardware(instance_type: str = "p5.48xlarge", count: int = 2, precision: str = "bf16") -> Hardware:
    return of_group(spec(instance_type, count).node_groups[0], precision)


def figures(obj: Any, path: str = "") -> List[tuple]:
    """Every (path, figure) in a report: dicts holding 'value' and 'unit'."""
    out: List[tuple] = []
    if isinstance(obj, dict):
        if "value" in obj and "unit" in obj:
            out.append((path, obj))
        for k, v in obj.items():
            out.extend(figures(v, f"{path}.{k}"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(figures(v, f"{path}[{i}]"))
    return out

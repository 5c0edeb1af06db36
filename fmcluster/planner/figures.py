"""Figures that carry their formula and inputs, and the units they are shown in."""

from __future__ import annotations

from typing import Any, Dict

GB = 1e9
GIB = 2**30
TIB = 2**40


def fig(value: float, unit: str, formula: str, **inputs: Any) -> Dict[str, Any]:
    """One figure as `--json` shows it: value, unit, the formula and every input it used."""
    return {"value": _round(value), "unit": unit, "formula": formula, "inputs": {k: _round(v) for k, v in inputs.items()}}


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.9g}")
    return v


def val(f: Dict[str, Any]) -> float:
    return float(f["value"])


def human_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def human_seconds(s: float) -> str:
    if s == 0:
        return "0"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    if s < 120:
        return f"{s:.3g} s"
    if s < 7200:
        return f"{s / 60:.3g} min"
    if s < 172800:
        return f"{s / 3600:.3g} h"
    return f"{s / 86400:.3g} days"


def human_count(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:g}"


def money(x: float) -> str:
    if x >= 1e6:
        return f"${x / 1e6:,.3g}M"
    if x >= 1e4:
        return f"${x:,.0f}"
    return f"${x:,.2f}"

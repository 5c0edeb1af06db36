"""Figures that carry their formula and inputs, and the units they are shown in."""

from __future__ import annotations

import math
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


def plain(x: float, sig: int = 3) -> str:
    """`sig` significant digits, never in scientific notation: 6,553,600 not 6.5536e+06, 1,170 not 1.17e+03."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    digits = sig - 1 - math.floor(math.log10(abs(x)))
    if digits <= 0:
        return f"{round(x, digits):,.0f}"
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def percent(share: float) -> str:
    return f"{plain(share * 100, 2)}%"


def human_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{plain(n / size)} {unit}"
    return f"{n:.0f} B"


def human_seconds(s: float) -> str:
    if s == 0:
        return "0"
    if s < 1e-3:
        return f"{plain(s * 1e6)} µs"
    if s < 1:
        return f"{plain(s * 1e3)} ms"
    if s < 120:
        return f"{plain(s)} s"
    if s < 7200:
        return f"{plain(s / 60)} min"
    if s < 172800:
        return f"{plain(s / 3600)} h"
    return f"{plain(s / 86400)} days"


def human_count(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{plain(n / size)}{unit}"
    return plain(n, 6)


def money(x: float) -> str:
    if x >= 1e6:
        return f"${plain(x / 1e6)}M"
    if x >= 1e4:
        return f"${x:,.0f}"
    if 0 < x < 0.1:  # per-hour service rates ($0.045 a NAT gateway-hour) would round to a misleading cent
        return f"${x:.3g}"
    return f"${x:,.2f}"

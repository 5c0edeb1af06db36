"""A plan option's value as the user typed it: a positive number with the planner's suffixes (K, M, B/G, T), one
error line naming the option otherwise. Shared by plan, plan --serve and plan-rules."""

from __future__ import annotations

from typing import Any, Optional

from fmcluster.planner.errors import PlanUsageError


def number(args: Any, name: str, integer: bool = False, upper: Optional[float] = None) -> Optional[float]:
    """The value of --NAME as a positive number (suffixes K, M, B/G, T), or None when absent."""
    raw = getattr(args, name, None)
    if raw is None:
        return None
    from fmcluster.planner.models import parse_count

    option = "--" + name.replace("_", "-")
    try:
        value = parse_count(str(raw))
    except ValueError:
        raise PlanUsageError(f"{option}: {raw!r} is not a number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise PlanUsageError(f"{option}: must be greater than 0")
    if integer and value != int(value):
        raise PlanUsageError(f"{option}: must be a whole number")
    if upper is not None and value > upper:
        raise PlanUsageError(f"{option}: must be at most {upper:g}")
    return value

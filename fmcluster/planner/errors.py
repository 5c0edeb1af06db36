"""The one error the planner raises for bad options."""

from __future__ import annotations


class PlanUsageError(ValueError):
    """A bad option: the message starts with the option's name (``--params: must be greater than 0``)."""

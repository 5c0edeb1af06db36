"""systemd probe: the state of the units the profile cares about, in one `systemctl is-active` call."""

from __future__ import annotations

from typing import Dict

from ..context import Ctx
from ..contract import agent_unit
from ..node import ProbeError
from ..profile import has_nvswitch

KNOWN_STATES = {"active", "inactive", "failed", "activating", "deactivating", "reloading", "unknown", "maintenance"}


def unit_states(ctx: Ctx) -> Dict[str, str]:
    """systemctl is-active for every unit the profile cares about (fabric manager, node agent), in one call."""
    def probe():  # type: ignore[no-untyped-def]
        units = []
        if has_nvswitch(ctx.profile):
            units.append("nvidia-fabricmanager")
        agent = agent_unit(ctx.profile.orchestrator)
        if agent is not None:
            units.append(agent)
        if not units:
            return ("ok", {})
        res = ctx.node.run(("systemctl", "is-active", *units))
        if res.error:
            return ("err", res.why())
        states = [s.strip() for s in res.stdout.splitlines() if s.strip()]
        if len(states) != len(units) or not set(states) <= KNOWN_STATES:
            return ("err", f"systemctl is-active output not understood: {res.stdout.strip()[:100]!r}")
        return ("ok", dict(zip(units, states)))

    kind, value = ctx.memo("systemctl", probe)
    if kind == "err":
        raise ProbeError(value)
    return value

"""Layer 8: orchestrator — the node agent (slurmd / kubelet) active, the Slurm controller's view of this node."""

from __future__ import annotations

import re
import socket
from typing import Optional

from ..contract import AGENT_UNITS, agent_unit
from ..node import ProbeError
from ..probes.systemd import unit_states
from .registry import Ctx, Result, bad, check, ok, skip


@check("orch.agent", "orchestrator", level="standard", applies=lambda p: p.orchestrator is not None,
       title="Orchestrator agent active (slurmd / kubelet)")
def agent(ctx: Ctx) -> Result:
    unit = agent_unit(ctx.profile.orchestrator) or "none"
    state = unit_states(ctx).get(unit, "unknown")
    if state == "active":
        return ok(f"{unit} {state}", f"{unit} active")
    return bad(f"{unit} {state}", f"{unit} active", f"systemctl restart {unit}; journalctl -u {unit}")


# `scontrol show node NAME` (Slurm's slurm_sprint_node_table): "   State=IDLE+DRAIN ThreadsPerCore=1 ..." (base state
# and flags joined by '+'), and, when set, "   Reason=<text> [<user>@<time>]" as the last field of its line. An
# unknown name prints "Node NAME not found" on stdout and exits 1 (src/scontrol/info_node.c): scontrol matches
# NodeName exactly, so a node registered under another name than its hostname is not found either.
BAD_NODE_STATES = {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING"}
DRAIN_STATES = {"DRAIN", "DRAINED", "DRAINING"}
# actions.reason_for(): the boot validator's drains and the Slurm health check's (health_check.REASON_PREFIX)
OUR_REASONS = ("fmcluster validate", "fmcluster health")


def _slurmd_state(ctx: Ctx) -> Optional[str]:
    try:
        return unit_states(ctx).get(AGENT_UNITS["slurm"])
    except ProbeError:
        return None


@check("orch.slurm_node", "orchestrator", level="standard", applies=lambda p: p.orchestrator == "slurm",
       title="Slurm node state not DOWN, DRAIN, FAIL or NOT_RESPONDING (a drain by fmcluster itself excepted)")
def slurm_node(ctx: Ctx) -> Result:
    name = ctx.node_name or socket.gethostname()
    res = ctx.node.run(("scontrol", "show", "node", name))
    expected = "IDLE, ALLOCATED, MIXED or COMPLETING (not DOWN/DRAIN/FAIL/NOT_RESPONDING)"
    if res.error == "not found on PATH":
        return skip("scontrol not installed: the Slurm node state cannot be read", expected)
    if res.error:
        raise ProbeError(res.why())
    if re.search(rf"^Node {re.escape(name)} not found", res.stdout + res.stderr, re.M):
        return skip(f"node {name} is not known to the Slurm controller (yet: it registers when slurmd starts; "
                    "or its NodeName differs from the hostname)", expected)
    m = re.search(r"(?:^|\s)State=(\S+)", res.stdout)
    if res.rc != 0 or m is None:
        raise ProbeError(res.why() if res.rc != 0 else
                         f"scontrol show node output not understood: {res.stdout.strip()[:100]!r}")
    state = m.group(1)
    r = re.search(r"^\s*Reason=(.*?)\s*$", res.stdout, re.M)
    reason = r.group(1) if r else ""
    tokens = {re.sub(r"[^A-Z_]", "", t.upper()) for t in state.split("+")}
    if "*" in state:  # sinfo-style marker for a node that does not respond
        tokens.add("NOT_RESPONDING")
    ours = reason.startswith(OUR_REASONS)
    failing = (tokens & BAD_NODE_STATES) - (DRAIN_STATES if ours else set())
    observed = f"{name}: State={state}" + (f" Reason={reason}" if reason else "")
    if failing and failing <= {"DOWN", "NOT_RESPONDING"}:
        slurmd = _slurmd_state(ctx)
        if slurmd is not None and slurmd != "active":
            return skip(f"{observed}; slurmd is {slurmd}: the controller hears from this node only once slurmd "
                        "runs (at boot it starts after the validator; orch.agent checks it)", expected)
    if failing:
        if tokens & DRAIN_STATES and not ours:
            remedy = (f"drained by someone else (see Reason): fix the cause, then scontrol update nodename={name} "
                      "state=resume")
        else:
            remedy = (f"the controller marks the node {'/'.join(sorted(failing))}: check slurmd "
                      f"(journalctl -u slurmd), munge and the network to slurmctld, then scontrol update "
                      f"nodename={name} state=resume")
        return bad(observed, expected, remedy)
    detail = ""
    if tokens & DRAIN_STATES:
        detail = (f"drained by an earlier fmcluster run; this run does not resume it: scontrol update "
                  f"nodename={name} state=resume once the node is healthy")
    return ok(observed, expected, detail)

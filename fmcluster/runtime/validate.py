"""Node boot validator: prove the stack before the node takes work.

    python3 -m fmcluster.runtime.validate --instance-type T | --profile FILE [--root DIR]
        [--level fast|standard|deep] [--format text|json] [--prom FILE]
        [--policy fail|drain|taint|report] [--node-name NAME] [--tool-timeout S] [--deadline S]

Exit 0: every required check passed; 1: a required check failed (or errored, unless the profile sets
errors_fail false); 2: usage error (bad option, unknown type, unreadable profile). Standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from . import actions, report
from .checks import LEVELS, Check, Ctx, Result, all_checks
from .probes import Node, ProbeError
from .profile import POLICIES, NodeProfile, ProfileError

# Overall time budget per level (seconds): fast = files only, standard = + one call of each tool,
# deep = + DCGM diag -r 2, GEMM/HBM, NCCL all-reduce, EFA loopback.
BUDGETS = {"fast": 10.0, "standard": 60.0, "deep": 1800.0}
DEFAULT_TOOL_TIMEOUT = 20.0


class Outcome:
    __slots__ = ("check", "result", "duration")

    def __init__(self, check: Check, result: Result, duration: float) -> None:
        self.check = check
        self.result = result
        self.duration = duration


def _run_one(check: Check, ctx: Ctx, sink: Dict[str, Outcome]) -> None:
    start = time.monotonic()
    try:
        result = check.fn(ctx)
        if not isinstance(result, Result):
            result = Result("error", f"check returned {type(result).__name__}", None, "report a bug in fmcluster")
    except ProbeError as exc:
        result = Result("error", str(exc), None, check.remedy or "the tool is missing, hung or printed something "
                                                                 "unexpected: run it by hand")
    except Exception as exc:  # noqa: BLE001 - a broken check must not stop the others
        result = Result("error", f"internal error: {type(exc).__name__}: {exc}", None, "report a bug in fmcluster")
    sink[check.id] = Outcome(check, result, time.monotonic() - start)


def run_checks(profile: NodeProfile, level: str, node: Node, budget: float,
               checks: Optional[List[Check]] = None, skip: Sequence[str] = (),
               node_name: Optional[str] = None) -> List[Outcome]:
    """Run every applicable check of level concurrently, under the overall deadline."""
    ctx = Ctx(node, profile, level, node_name=node_name)
    checks = checks if checks is not None else all_checks()
    sink: Dict[str, Outcome] = {}
    threads: List[threading.Thread] = []
    start = time.monotonic()
    for c in checks:
        if c.id in profile.disabled_checks:
            sink[c.id] = Outcome(c, Result("skip", "disabled in the profile"), 0.0)
        elif c.id in skip:
            sink[c.id] = Outcome(c, Result("skip", "skipped for this run (--skip)"), 0.0)
        elif c.applies is not None and not c.applies(profile):
            sink[c.id] = Outcome(c, Result("skip", f"not applicable to {profile.instance_type}"), 0.0)
        elif LEVELS.index(c.level) > LEVELS.index(level):
            sink[c.id] = Outcome(c, Result("skip", f"runs at level {c.level}"), 0.0)
        else:
            t = threading.Thread(target=_run_one, args=(c, ctx, sink), name=c.id, daemon=True)
            threads.append(t)
            t.start()
    end = start + budget
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    outcomes = []
    for c in checks:
        o = sink.get(c.id)
        if o is None:
            o = Outcome(c, Result("error", f"did not finish within the {budget:.0f}s budget of level {level}", None,
                                  "a probe is stuck (D-state I/O or hung tool): investigate by hand"),
                        time.monotonic() - start)
        outcomes.append(o)
    return outcomes


def build_report(profile: NodeProfile, level: str, outcomes: List[Outcome], started: float, wall: float,
                 hostname: str) -> Dict[str, Any]:
    checks = []
    failing = []
    summary = {s: 0 for s in ("pass", "fail", "warn", "skip", "error")}
    for o in outcomes:
        r = o.result
        summary[r.status] += 1
        if o.check.required and (r.status == "fail" or (r.status == "error" and profile.errors_fail)):
            failing.append(o.check.id)
        checks.append({
            "id": o.check.id, "layer": o.check.layer, "title": o.check.title, "level": o.check.level,
            "required": o.check.required, "status": r.status, "observed": r.observed, "expected": r.expected,
            "duration_s": round(o.duration, 3), "remedy": r.remedy, "detail": r.detail,
        })
    finished = time.time()
    return {
        "schema": report.REPORT_SCHEMA,
        "tool": "fmcluster.runtime.validate",
        "instance_type": profile.instance_type,
        "group": profile.group,
        "level": level,
        "hostname": hostname,
        "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(),
        "finished_unix": finished,
        "duration_s": round(wall, 3),
        "verdict": "fail" if failing else "pass",
        "exit_code": 1 if failing else 0,
        "failing": failing,
        "summary": summary,
        "checks": checks,
    }


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python3 -m fmcluster.runtime.validate",
                                 description="Validate this node's GPU/EFA/storage stack against its NodeProfile.")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--instance-type", help="build the profile from the catalog (ml. prefix accepted)")
    src.add_argument("--profile", help="NodeProfile JSON rendered at synth")
    ap.add_argument("--root", default="/", help="prefix for every file read (fixture trees); default /")
    ap.add_argument("--level", choices=LEVELS, help="default: the profile's level (standard)")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--prom", metavar="FILE", help="write a Prometheus textfile (atomically)")
    ap.add_argument("--policy", choices=POLICIES, help="action when unhealthy; default: the profile's (report)")
    ap.add_argument("--node-name", help="node name for drain/taint; default: hostname")
    ap.add_argument("--tool-timeout", type=float,
                    default=float(os.environ.get("FMCLUSTER_TOOL_TIMEOUT", DEFAULT_TOOL_TIMEOUT)),
                    help="seconds each external command may take (default 20)")
    ap.add_argument("--skip", action="append", default=[], metavar="CHECK",
                    help="skip a check for this run, e.g. orch.agent at boot, before the agent starts (repeatable)")
    ap.add_argument("--deadline", type=float, help="overall budget in seconds (default: fast 10, standard 60, deep 1800)")
    return ap


def load_profile(args: argparse.Namespace) -> NodeProfile:
    if args.profile:
        try:
            with open(args.profile, encoding="utf-8") as fh:
                return NodeProfile.from_json(fh.read())
        except OSError as exc:
            raise ProfileError(f"cannot read profile {args.profile}: {exc.strerror or exc}") from exc
    return NodeProfile.from_catalog(args.instance_type)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)  # exits 2 on usage errors
    try:
        profile = load_profile(args)
    except (ProfileError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not os.path.isdir(args.root):
        print(f"error: --root {args.root}: not a directory", file=sys.stderr)
        return 2
    if args.tool_timeout <= 0 or (args.deadline is not None and args.deadline <= 0):
        print("error: --tool-timeout and --deadline must be positive", file=sys.stderr)
        return 2
    level = args.level or profile.level
    policy = args.policy or profile.policy
    budget = args.deadline if args.deadline is not None else BUDGETS[level]
    started, t0 = time.time(), time.monotonic()
    node = Node(root=args.root, tool_timeout=args.tool_timeout, deadline=t0 + max(0.1, budget - 0.5))
    unknown = sorted(set(args.skip) - {c.id for c in all_checks()})
    if unknown:
        print(f"error: --skip {', '.join(unknown)}: no such check", file=sys.stderr)
        return 2
    outcomes = run_checks(profile, level, node, budget, skip=args.skip, node_name=args.node_name)
    hostname = socket.gethostname()
    rep = build_report(profile, level, outcomes, started, time.monotonic() - t0, hostname)
    slurm = next((c for c in rep["checks"] if c["id"] == "orch.slurm_node"), None)
    if policy == "drain" and slurm is not None and slurm["status"] == "fail":
        # someone (an operator, the controller) already took the node out: keep their state and reason
        rep["action"] = {"policy": policy, "result": f"none (already out of service: {slurm['observed']})"}
    else:
        rep["action"] = actions.act(policy, rep["verdict"] == "pass", rep["failing"], args.node_name or hostname)
    if args.prom:
        try:
            report.write_atomic(args.prom, report.to_prom(rep))
        except OSError as exc:
            print(f"warning: cannot write {args.prom}: {exc}", file=sys.stderr)
    sys.stdout.write(report.to_json(rep) if args.format == "json" else report.to_text(rep))
    sys.stdout.flush()
    return int(rep["exit_code"])


if __name__ == "__main__":
    sys.exit(main())

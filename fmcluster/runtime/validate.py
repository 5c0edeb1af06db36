"""Node boot validator: prove the stack before the node takes work.

    python3 -m fmcluster.runtime.validate --instance-type T | --profile FILE [--root DIR]
        [--level fast|standard|deep] [--format text|json] [--prom FILE]
        [--policy fail|drain|taint|replace|report] [--node-name NAME] [--tool-timeout S] [--deadline S]

Exit 0: every required check passed; 1: a required check failed (or errored, unless the profile sets
errors_fail false); 2: usage error (bad option, unknown type, unreadable profile). Standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from . import actions, report
from .checks import LEVELS, Check, Ctx, Result, all_checks
from .node import Node, ProbeError
from .profile import POLICIES, NodeProfile, ProfileError

# Overall time budget per level (seconds): fast = files only, standard = + one call of each tool,
# deep = + DCGM diag -r 2, GEMM/HBM, NCCL all-reduce, EFA loopback.
BUDGETS = {"fast": 10.0, "standard": 60.0, "deep": 1800.0}
DEFAULT_TOOL_TIMEOUT = 20.0
TOOL_TIMEOUT_ENV = "FMCLUSTER_TOOL_TIMEOUT"
# Time kept back from the checks for the drain or taint (scontrol, kubectl) so that it, too, ends by --deadline:
# a quarter of the budget, at most ACTION_TIMEOUT.
ACTION_TIMEOUT = 30.0


class UsageError(Exception):
    """A bad argument or environment value: one line, exit 2."""


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


# The most --deadline and --tool-timeout take: a day, far past the deep level's 30 minutes and within what a
# thread's or a process's wait takes (1e308 overflowed time_t into a traceback).
MAX_SECONDS = 86_400.0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give a number of seconds greater than 0 and at most "
                                         f"{MAX_SECONDS:.0f} (a day)")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2 (argparse would print its usage too)
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python3 -m fmcluster.runtime.validate",
                 description="Validate this node's GPU/EFA/storage stack against its NodeProfile.")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--instance-type", help="build the profile from the catalog (ml. prefix accepted)")
    src.add_argument("--profile", help="NodeProfile JSON rendered at synth")
    ap.add_argument("--root", default="/", help="prefix for every file read (fixture trees); default /")
    ap.add_argument("--level", choices=LEVELS, help="default: the profile's level (standard)")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--prom", metavar="FILE", help="write a Prometheus textfile (atomically: a temporary file beside "
                    "it, synced, renamed); FILE must be absent or a regular file")
    ap.add_argument("--policy", choices=POLICIES, help="action when unhealthy; default: the profile's (report)")
    ap.add_argument("--node-name", help="node name for drain/taint; default: hostname")
    ap.add_argument("--tool-timeout", type=_seconds,
                    help=f"seconds each external command may take (default ${TOOL_TIMEOUT_ENV}, else 20)")
    ap.add_argument("--skip", action="append", default=[], metavar="CHECK",
                    help="skip a check for this run, e.g. orch.agent at boot, before the agent starts (repeatable)")
    ap.add_argument("--deadline", type=_seconds,
                    help="overall budget in seconds, the drain or taint included (default: fast 10, standard 60, "
                    "deep 1800)")
    return ap


def load_profile(args: argparse.Namespace) -> NodeProfile:
    if args.profile:
        try:
            with open(args.profile, encoding="utf-8") as fh:
                return NodeProfile.from_json(fh.read())
        except OSError as exc:
            raise ProfileError(f"cannot read profile {args.profile}: {exc.strerror or exc}") from exc
    return NodeProfile.from_catalog(args.instance_type)


def _tool_timeout(args: argparse.Namespace) -> float:
    if args.tool_timeout is not None:
        return float(args.tool_timeout)
    raw = os.environ.get(TOOL_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TOOL_TIMEOUT
    try:
        return _seconds(raw)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"{TOOL_TIMEOUT_ENV}={exc}") from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = _parser().parse_args(argv)
        tool_timeout = _tool_timeout(args)
        profile = load_profile(args)
    except (UsageError, ProfileError, ValueError, OSError, RecursionError) as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    if not os.path.isdir(args.root):
        print(f"error: --root {one_line(args.root)}: not a directory", file=sys.stderr)
        return 2
    unknown = sorted(set(args.skip) - {c.id for c in all_checks()})
    if unknown:
        print(f"error: --skip {one_line(', '.join(unknown))}: no such check", file=sys.stderr)
        return 2
    problem = report.replaceable(args.prom) if args.prom else None
    if problem:
        print(f"error: --prom {one_line(args.prom)}: {problem}", file=sys.stderr)
        return 2
    started, t0 = time.time(), time.monotonic()
    try:
        return _validate(args, profile, tool_timeout, started, t0)
    except Exception as exc:  # noqa: BLE001 - a node never ends without its report
        return _emit_crash(args, profile, exc, started, time.monotonic() - t0)


def _validate(args: argparse.Namespace, profile: NodeProfile, tool_timeout: float, started: float, t0: float) -> int:
    level = args.level or profile.level
    policy = args.policy or profile.policy
    budget = args.deadline if args.deadline is not None else BUDGETS[level]
    reserve = min(ACTION_TIMEOUT, budget / 4) if policy in ("drain", "taint", "replace") else 0.0
    checks_budget = budget - reserve
    node = Node(root=args.root, tool_timeout=tool_timeout, deadline=t0 + max(0.1, checks_budget - 0.5))
    outcomes = run_checks(profile, level, node, checks_budget, skip=args.skip, node_name=args.node_name)
    hostname = socket.gethostname()
    rep = build_report(profile, level, outcomes, started, time.monotonic() - t0, hostname)
    slurm = next((c for c in rep["checks"] if c["id"] == "orch.slurm_node"), None)
    if policy in ("drain", "replace") and slurm is not None and slurm["status"] == "fail":
        # someone (an operator, the controller) already took the node out: keep their state and reason
        rep["action"] = {"policy": policy, "result": f"none (already out of service: {slurm['observed']})"}
    else:
        left = max(1.0, t0 + budget - time.monotonic())  # the action ends by the deadline too
        rep["action"] = actions.act(policy, rep["verdict"] == "pass", rep["failing"], args.node_name or hostname,
                                    timeout=min(ACTION_TIMEOUT, left))
    _write(args, rep)
    return int(rep["exit_code"])


def _write(args: argparse.Namespace, rep: Dict[str, Any]) -> None:
    if args.prom:
        try:
            report.write_atomic(args.prom, report.to_prom(rep), regular_only=True)
        except OSError as exc:
            print(f"warning: cannot write {args.prom}: {exc}", file=sys.stderr)
    sys.stdout.write(report.to_json(rep) if args.format == "json" else report.to_text(rep))
    sys.stdout.flush()


def _emit_crash(args: argparse.Namespace, profile: NodeProfile, exc: BaseException, started: float,
                wall: float) -> int:
    """The report of a run that broke: verdict error, exit 1, what broke; the node is never left without one."""
    rep: Dict[str, Any] = {
        "schema": report.REPORT_SCHEMA, "tool": "fmcluster.runtime.validate", "instance_type": profile.instance_type,
        "group": profile.group, "level": args.level or profile.level, "hostname": socket.gethostname(),
        "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(),
        "finished_unix": time.time(), "duration_s": round(wall, 3), "verdict": "error", "exit_code": 1,
        "failing": [], "summary": {s: 0 for s in ("pass", "fail", "warn", "skip", "error")}, "checks": [],
        "error": f"internal error: {type(exc).__name__}: {one_line(str(exc))}; report a bug in fmcluster",
        "action": {"policy": args.policy or profile.policy, "result": "none (the run broke before judging)"},
    }
    print(f"error: {rep['error']}", file=sys.stderr)
    try:
        _write(args, rep)
    except Exception:  # noqa: BLE001 - a report the formatter cannot render still goes out as JSON
        sys.stdout.write(json.dumps(rep, default=str) + "\n")
        sys.stdout.flush()
    return 1


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    sys.exit(main())

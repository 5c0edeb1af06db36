"""Slurm's periodic node health check: the boot validator's fast checks that a fault can change during a node's life.

    python3 -m fmcluster.runtime.health_check run --profile FILE [--node-name NAME] [--policy drain|report]
        [--resume | --no-resume] [--root DIR] [--deadline S]
    python3 -m fmcluster.runtime.health_check install [--profile FILE] [--hook-dir DIR] [--node-name NAME]
        [--shim PATH]

slurmd runs ``HealthCheckProgram`` as root every ``HealthCheckInterval`` seconds on every node that responds, and
once when it starts, before it registers; it kills the program after 60 seconds, and any action must be taken by
the program itself, e.g. ``scontrol update ... state=drain`` (slurm.conf(5), HealthCheckProgram). ``install``
writes that program (HOOK_DIR/health_check.sh): it runs ``run`` under a timeout well inside those 60 seconds,
sends a bounded summary to the journal and always exits 0; with ``--shim`` also a script for a shared directory
that runs the node's program where there is one and succeeds where there is none.

``run`` judges the checks in HEALTH_CHECKS only (the fast level reads sysfs, procfs and device files; it never
reads GPU utilisation or memory in use, so a busy node passes it) and acts through `actions`:

- a check that *failed* drains the node with reason ``fmcluster health: <checks>`` (policy drain), unless Slurm
  already holds it out for another reason (an operator's or the controller's stays as it is). Running jobs finish:
  a drain lets them (DRAINING), it only stops new ones;
- a check that ended in *error* (a read that did not finish, a tool missing) is reported, never acted on: a
  loaded node may be slow to answer, and a check that could not run proves nothing either way;
- with ``--resume``, a node that this health check drained and that now passes every check is resumed, unless the
  drain named a hardware fault (`actions.HARDWARE_FAULTS`): those need a GPU reset, a reboot or a new instance,
  and their evidence (the kernel log) can scroll away, so passing later proves nothing.

Exit status: 0 whatever the node's health (2 on a usage error); the summary is one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import actions
from .checks import all_checks
from .node import Node, run_command
from .profile import NodeProfile, ProfileError
from .slurm_hooks import shim_script, write_executable
from .validate import run_checks

HOOK_DIR = "/opt/fmcluster/slurm"
PROGRAM = "health_check.sh"
# Faults a running node can develop, judged from files only: a GPU off the bus or unbound, the driver unloaded or
# mismatched after a package update, failing Xids (application Xids only warn), a degraded PCIe link, EFA devices,
# ports or verbs gone, the shared file system or instance store unmounted. Left out: the version floors, pinned
# versions, settings and paths (hw.instance_type, acc.cuda, efa.installer, efa.libfabric, efa.memlock, gdr.*,
# ofi.plugin, comm.env_hygiene, fw.torch, dist.*, versions.pinned, containers.data_root), which only an operator
# changes and the boot already judged. An include list, so a fast check added later does not join by accident.
HEALTH_CHECKS = frozenset({
    "hw.gpu.pci", "hw.gpu.driver", "hw.driver.version", "hw.xid", "hw.pcie_link",
    "efa.devices", "efa.ports", "efa.uverbs", "storage.mounts", "storage.instance_store",
})
REASON_PREFIX = "fmcluster health: "
DEFAULT_DEADLINE = 30.0  # checks and scontrol together; the program's timeout (WRAPPER_TIMEOUT_S) is above it
WRAPPER_TIMEOUT_S = 40  # slurmd kills HealthCheckProgram after 60 s
SCONTROL_TIMEOUT = 10.0
OUTPUT_LIMIT = 2000  # bytes of the summary the program logs
DRAIN_STATES = {"DRAIN", "DRAINED", "DRAINING"}
OUT_OF_SERVICE = DRAIN_STATES | {"DOWN", "FAIL", "FAILING"}
# What the health check does under each validation.policy: drain where the policy keeps an unhealthy node out of
# work (drain; fail and replace, which end a boot, mean drain for a node that is already running: ParallelCluster's
# clustermgtd replaces a drained node once its jobs end); report only otherwise.
POLICY_ACTION = {"drain": "drain", "fail": "drain", "replace": "drain", "report": "report", "taint": "report"}


class UsageError(Exception):
    pass


def judge(profile: NodeProfile, node: Node, budget: float, node_name: Optional[str]) -> Tuple[List[str], List[str]]:
    """(failed, errored): required checks of HEALTH_CHECKS that failed, and those that could not be judged."""
    checks = [c for c in all_checks() if c.id in HEALTH_CHECKS]
    outcomes = run_checks(profile, "fast", node, budget, checks=checks, node_name=node_name)
    failed = [o.check.id for o in outcomes if o.check.required and o.result.status == "fail"]
    errored = [o.check.id for o in outcomes if o.check.required and o.result.status == "error"]
    return failed, errored


def slurm_state(name: str, timeout: float) -> Tuple[Optional[set], str, str]:
    """(state tokens or None when unknown, reason, why unknown) from `scontrol show node NAME`: "State=IDLE+DRAIN"
    (base state and flags joined by '+') and "Reason=<text> [<user>@<time>]" on a line of its own."""
    res = run_command(["scontrol", "show", "node", name], timeout)
    if not res.ok:
        return None, "", res.why()
    m = re.search(r"(?:^|\s)State=(\S+)", res.stdout)
    if m is None:
        return None, "", f"scontrol output not understood: {res.stdout.strip()[:100]!r}"
    tokens = {re.sub(r"[^A-Z_]", "", t.upper()) for t in m.group(1).split("+")}
    r = re.search(r"^\s*Reason=(.*?)(?:\s+\[[^\]]*\])?\s*$", res.stdout, re.M)
    return tokens, (r.group(1) if r else ""), ""


def decide(action: str, resume: bool, failed: List[str], errored: List[str], tokens: Optional[set],
           reason: str) -> Tuple[str, Optional[str], List[str]]:
    """(what to do: drain | resume | none, why, the checks a drain names)."""
    ours = reason.startswith(REASON_PREFIX)
    named = sorted(n for n in reason[len(REASON_PREFIX):].split(",") if n) if ours else []
    if failed:
        if action != "drain":
            return "none", f"policy {action}: reported only", []
        if tokens is None:
            return "drain", "the node's Slurm state is unknown; draining is safe to repeat", failed
        if tokens & OUT_OF_SERVICE and not ours:
            return "none", f"already out of service ({'+'.join(sorted(tokens & OUT_OF_SERVICE))}: {reason or '-'})", []
        if not (ours and tokens & DRAIN_STATES):
            return "drain", None, failed
        # drained by an earlier run: the reason keeps every check it named, so a hardware fault whose evidence has
        # since scrolled out of the kernel log still holds the node
        union = sorted(set(named) | set(failed))
        if union == named:
            return "none", "already drained by the health check for these checks", []
        return "drain", None, union
    if errored:
        return "none", "some checks could not be judged; nothing changes", []
    if not (resume and ours and tokens and tokens & DRAIN_STATES):
        return "none", None, []
    if actions.hardware_fault(named):
        return "none", "drained for a hardware fault: a reset, reboot or new instance returns it, not a pass", []
    return "resume", None, []


def run(args: argparse.Namespace) -> Dict[str, Any]:
    started = time.monotonic()
    with open(args.profile, encoding="utf-8") as fh:
        profile = NodeProfile.from_json(fh.read())
    policy = args.policy or POLICY_ACTION.get(profile.policy, "report")
    resume = args.resume if args.resume is not None else profile.policy == "drain"
    name = args.node_name or os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    budget = max(1.0, args.deadline - SCONTROL_TIMEOUT * 2)
    node = Node(root=args.root, tool_timeout=SCONTROL_TIMEOUT, deadline=started + budget)
    failed, errored = judge(profile, node, budget, name)
    tokens, reason, unknown = slurm_state(name, SCONTROL_TIMEOUT)
    what, why, drain_for = decide(policy, resume, failed, errored, tokens, reason)
    summary: Dict[str, Any] = {"node": name, "failed": failed, "errored": errored, "action": what}
    if unknown:
        summary["slurm_state"] = f"unknown: {unknown}"
    if why:
        summary["why"] = why
    if what == "drain":
        summary["result"] = actions.act("drain", False, drain_for, name, timeout=SCONTROL_TIMEOUT,
                                        reason=actions.reason_for(drain_for, REASON_PREFIX))["result"]
    elif what == "resume":
        res = run_command(actions.resume_argv(name), SCONTROL_TIMEOUT)
        summary["result"] = "done" if res.ok else f"FAILED ({res.why()})"
    summary["duration_s"] = round(time.monotonic() - started, 3)
    return summary


def program_script(*, python: str, pkg_root: str, profile: str, node_name: Optional[str], path: str) -> str:
    """The program slurmd runs: `run` under a timeout, its summary (bounded) to the journal, exit 0 always."""
    q = shlex.quote
    name = f" --node-name {q(node_name)}" if node_name else ""
    return f"""#!/bin/sh
# fmcluster: Slurm HealthCheckProgram (fmcluster.runtime.health_check). It always exits 0 and acts itself (drain,
# resume); slurmd kills it after 60 s, so it stops at {WRAPPER_TIMEOUT_S} s. Slurm runs it without PATH.
export PATH={q(path)}
out=$(PYTHONPATH={q(pkg_root)} timeout -k 5 {WRAPPER_TIMEOUT_S} {q(python)} -m fmcluster.runtime.health_check run \\
  --profile {q(profile)}{name} 2>&1 | head -c {OUTPUT_LIMIT})
[ -z "$out" ] || logger -t fmcluster-health -- "$out" 2>/dev/null
exit 0
"""


def program_path(hook_dir: str = HOOK_DIR) -> str:
    """What a HealthCheckProgram= setting names."""
    return os.path.join(hook_dir, PROGRAM)


def install(args: argparse.Namespace) -> List[str]:
    """The node's program (with --profile) and the shim (with --shim); the paths written."""
    written: List[str] = []
    program = program_path(args.hook_dir)
    if args.profile:
        write_executable(program, program_script(python=sys.executable, pkg_root=_pkg_root(),
                                                  profile=os.path.abspath(args.profile), node_name=args.node_name,
                                                  path=_slurm_path()))
        written.append(program)
    if args.shim:
        write_executable(args.shim, shim_script("health check", program))
        written.append(args.shim)
    return written


def _pkg_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _slurm_path() -> str:
    """scontrol's directory as this boot finds it (PCS and ParallelCluster install Slurm outside the default PATH)."""
    scontrol = shutil.which("scontrol")
    dirs = ([os.path.dirname(scontrol)] if scontrol else []) + ["/opt/slurm/bin", "/usr/sbin", "/usr/bin", "/sbin",
                                                               "/bin"]
    return ":".join(dict.fromkeys(dirs))


# Run on every node that responds, busy ones included (a fault that appears under a job drains the node, and the job
# runs to its end), cycling through the nodes over the interval rather than all at once (slurm.conf(5),
# HealthCheckNodeState: ANY, CYCLE).
NODE_STATE = "ANY,CYCLE"


def slurm_settings(program: str, interval_seconds: int) -> Dict[str, str]:
    """The slurm.conf parameters that make slurmd run `program` as the health check."""
    return {"HealthCheckProgram": program, "HealthCheckInterval": str(interval_seconds),
            "HealthCheckNodeState": NODE_STATE}


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
    if not 1 <= value <= WRAPPER_TIMEOUT_S - 5:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give 1 to {WRAPPER_TIMEOUT_S - 5} seconds")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python3 -m fmcluster.runtime.health_check")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="judge this node once and drain or resume it")
    r.add_argument("--profile", required=True)
    r.add_argument("--node-name")
    r.add_argument("--policy", choices=("drain", "report"), help="default: from the profile's validation policy")
    r.add_argument("--resume", action="store_true", default=None, help="default: when the profile's policy is drain")
    r.add_argument("--no-resume", dest="resume", action="store_false")
    r.add_argument("--root", default="/")
    r.add_argument("--deadline", type=_seconds, default=DEFAULT_DEADLINE)
    i = sub.add_parser("install", help="write the program slurmd runs (--profile) and its shim (--shim)")
    i.add_argument("--profile")
    i.add_argument("--hook-dir", default=HOOK_DIR)
    i.add_argument("--node-name")
    i.add_argument("--shim", metavar="PATH")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.command == "install":
        if not (args.profile or args.shim):
            print("error: install: give --profile (the node's program), --shim PATH, or both", file=sys.stderr)
            return 2
        try:
            print("\n".join(install(args)))
        except OSError as exc:
            print(f"error: cannot write the health check: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        summary = run(args)
    except (OSError, ProfileError, ValueError) as exc:
        summary = {"action": "none", "error": " ".join(str(exc).split())[:300]}
    except Exception as exc:  # noqa: BLE001 - slurmd's program never crashes: it reports and exits 0
        summary = {"action": "none", "error": f"internal error: {type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

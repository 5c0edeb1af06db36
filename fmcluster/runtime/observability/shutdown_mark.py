"""A node says, in its last scrapes, that it is shutting down on purpose (standard library only).

NodeStoppedReporting names a node that went silent; a node removed on purpose (scale-in, HyperPod replacement,
teardown) goes silent too. EC2 shuts an instance's operating system down cleanly when it is stopped or
terminated, so the node can tell the two apart itself: install.sh's ``fmcluster-shutdown-mark.service`` runs
``stop`` when systemd stops it, which it does while the system shuts down and before it stops the collector and
node_exporter (the unit is ordered after them). ``stop`` writes ``fmcluster_node_shutting_down 1`` into the textfile
directory and waits one scrape interval and a margin, so the agent scrapes it and remote-writes it before it stops
in turn. A node that hangs, panics or loses power writes nothing and is still named.

``stop`` writes only while the system is going down (``systemctl is-system-running`` says ``stopping``): a
restart of the unit (install.sh re-run) must not mark a node that stays. ``start`` (at boot) removes the mark.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Callable, List, Optional

from fmcluster.runtime.observability import SHUTDOWN_PROM_FILE
from fmcluster.runtime.observability.textfile import emit, family

METRIC = "fmcluster_node_shutting_down"


def system_state() -> str:
    """What systemd says the system is doing: running, degraded, stopping, ... ('' when it cannot say)."""
    try:
        out = subprocess.run(["systemctl", "is-system-running"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip()


def text() -> str:
    return "\n".join(family(METRIC, "gauge", "1 while the node's operating system shuts down cleanly.", [({}, 1)])) + "\n"


def stop(out: str, wait_s: float, *, state: Callable[[], str] = system_state,
         sleep: Callable[[float], None] = time.sleep) -> int:
    if state() != "stopping":
        print(f"shutdown_mark: the system is not shutting down ({state() or 'unknown'}): no mark", file=sys.stderr)
        return 0
    code = emit(text(), out, "shutdown_mark")
    if code == 0:
        sleep(wait_s)  # the agent scrapes the mark and sends it before it stops
    return code


def start(out: str) -> int:
    try:
        os.unlink(out)
    except FileNotFoundError:
        pass
    except OSError as exc:
        print(f"shutdown_mark: cannot remove {out}: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="shutdown_mark", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["start", "stop"])
    ap.add_argument("--out", default=SHUTDOWN_PROM_FILE)
    ap.add_argument("--wait", type=float, default=45.0, help="seconds to wait after writing (a scrape interval and more)")
    args = ap.parse_args(argv)
    return start(args.out) if args.action == "start" else stop(args.out, args.wait)


if __name__ == "__main__":
    sys.exit(main())

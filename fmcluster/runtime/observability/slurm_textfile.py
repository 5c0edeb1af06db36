"""Slurm node states for node_exporter's textfile collector, on any node that runs Slurm's client commands.

    python3 -m fmcluster.runtime.observability.slurm_textfile [--sinfo PATH] [--timeout 20] [--out FILE]

Where it runs: the HyperPod controller, the AWS PCS login node (the PCS controller is AWS's), a ParallelCluster
head node. One node per cluster is enough (every sinfo is an RPC to slurmctld); the alert rules group by Slurm
node, so a second collector does not duplicate alerts.

``sinfo`` is found explicitly (`find_sinfo`), not from the caller's PATH: a systemd unit's default PATH has none
of Slurm's install prefixes.

Runs ``sinfo --noheader --Node --format=%N|%T`` under a timeout (one row per node and partition; a node is
counted once) and writes ``fmcluster_slurm_node_state{slurm_node,state}`` (1 for the node's base state),
``fmcluster_slurm_node_responding{slurm_node}`` (0 when the state carries ``*``),
``fmcluster_slurm_node_powered_down{slurm_node}`` (1 when it carries ``~`` or ``%``: Slurm's power saving has the
node off or turning off, as ParallelCluster does with idle dynamic nodes; their collectors stop on purpose),
``fmcluster_slurm_nodes{state}`` and ``fmcluster_slurm_collector_success``; then ``squeue --noheader
--states=RUNNING --format=%A|%N`` (the ``squeue`` beside ``sinfo``) for ``fmcluster_slurm_job_node{job_id,slurm_node}``,
1 per node a running job holds (host lists expanded locally: slurm_hostlist.py). A hung or failing sinfo writes
success 0 and no states, a hung or failing squeue no job series: never a hang. Exit 0 written (even when sinfo
failed), 1 the file could not be written.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
from typing import Dict, List, NamedTuple, Optional, Tuple

from fmcluster.runtime.observability import SLURM_PROM_FILE
from fmcluster.runtime.observability.slurm_hostlist import HostlistError, expand
from fmcluster.runtime.observability.textfile import emit, family

# Suffixes sinfo appends to a state (sinfo(1), NODE STATE CODES): * not responding, ~ powered off,
# # powering up, ! pending power down, % powering down, $ maintenance reservation, @ pending reboot,
# ^ reboot issued, - planned for a job.
STATE_SUFFIXES = "*~#!%$@^-"
POWERED_DOWN_SUFFIXES = "~%"

# Where Slurm installs its commands, most specific first: SageMaker HyperPod and AWS ParallelCluster use /opt/slurm;
# AWS PCS's Slurm installer uses /opt/aws/pcs/scheduler/slurm-<version> (PCS user guide). The newest PCS version
# wins when several are installed.
SINFO_FIXED = ("/opt/slurm/bin/sinfo",)
SINFO_PCS_GLOB = "/opt/aws/pcs/scheduler/slurm-*/bin/sinfo"


def _version_key(path: str) -> Tuple[int, ...]:
    version = path.split("/slurm-")[-1].split("/")[0]
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def find_sinfo(root: str = "/") -> Optional[str]:
    """The sinfo to run: a fixed Slurm prefix, else the newest PCS install, else one on PATH; None when none.

    `root` prefixes the fixed paths (tests); the returned path is the real one, under `root`."""
    for path in SINFO_FIXED:
        candidate = os.path.join(root, path.lstrip("/"))
        if os.access(candidate, os.X_OK):
            return candidate
    pcs = sorted(glob.glob(os.path.join(root, SINFO_PCS_GLOB.lstrip("/"))), key=_version_key)
    pcs = [p for p in pcs if os.access(p, os.X_OK)]
    if pcs:
        return pcs[-1]
    return shutil.which("sinfo")


class NodeState(NamedTuple):
    base: str
    responding: bool
    powered_down: bool = False


def parse_sinfo(text: str) -> Dict[str, NodeState]:
    """node → its state from ``%N|%T`` lines; the first row of a node wins."""
    nodes: Dict[str, NodeState] = {}
    for line in text.splitlines():
        if "|" not in line:
            continue
        name, _, state = (part.strip() for part in line.partition("|"))
        if not name or not state or name in nodes:
            continue
        base = state.rstrip(STATE_SUFFIXES).lower() or "unknown"
        suffixes = state[len(state.rstrip(STATE_SUFFIXES)):]
        nodes[name] = NodeState(base, "*" not in suffixes, any(c in suffixes for c in POWERED_DOWN_SUFFIXES))
    return nodes


def render(nodes: Optional[Dict[str, NodeState]], jobs: Optional[Dict[str, List[str]]] = None) -> str:
    ok = nodes is not None
    nodes = nodes or {}
    counts: Dict[str, int] = {}
    for n in nodes.values():
        counts[n.base] = counts.get(n.base, 0) + 1
    lines = family(
        "fmcluster_slurm_collector_success", "gauge", "1 when sinfo answered in time.", [({}, 1 if ok else 0)]
    )
    lines += family("fmcluster_slurm_nodes", "gauge", "Slurm nodes per base state.",
                    [({"state": s}, n) for s, n in sorted(counts.items())])
    lines += family("fmcluster_slurm_node_state", "gauge", "1 for the node's current base state.",
                    [({"slurm_node": n, "state": st.base}, 1) for n, st in sorted(nodes.items())])
    lines += family("fmcluster_slurm_node_responding", "gauge", "0 when slurmctld marks the node not responding.",
                    [({"slurm_node": n}, 1 if st.responding else 0) for n, st in sorted(nodes.items())])
    lines += family("fmcluster_slurm_node_powered_down", "gauge",
                    "1 while Slurm has the node powered off or powering off (~ or %).",
                    [({"slurm_node": n}, 1 if st.powered_down else 0) for n, st in sorted(nodes.items())])
    if jobs is not None:  # squeue answered: one series per running job and node it holds
        lines += family("fmcluster_slurm_job_node", "gauge", "1 for each node a running job holds.",
                        [({"job_id": j, "slurm_node": n}, 1) for j, hosts in sorted(jobs.items()) for n in hosts])
    return "\n".join(lines) + "\n"


def run_sinfo(sinfo: str, timeout: float) -> Optional[Dict[str, NodeState]]:
    try:
        out = subprocess.run(
            [sinfo, "--noheader", "--Node", "--format=%N|%T"],
            capture_output=True, text=True, timeout=timeout, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return parse_sinfo(out.stdout)


def parse_squeue(text: str) -> Dict[str, List[str]]:
    """job id → the nodes it holds, from ``%A|%N`` lines; a line whose host list does not parse is skipped."""
    jobs: Dict[str, List[str]] = {}
    for line in text.splitlines():
        job, _, hostlist = (part.strip() for part in line.partition("|"))
        if not job or not hostlist:
            continue
        try:
            jobs[job] = expand(hostlist)
        except HostlistError:
            continue
    return jobs


def run_squeue(squeue: str, timeout: float) -> Optional[Dict[str, List[str]]]:
    try:
        out = subprocess.run(
            [squeue, "--noheader", "--states=RUNNING", "--format=%A|%N"],
            capture_output=True, text=True, timeout=timeout, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return parse_squeue(out.stdout)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="slurm_textfile", description=__doc__.splitlines()[0])
    ap.add_argument("--sinfo", help="sinfo to run; default: found by find_sinfo")
    ap.add_argument("--root", default="/", help="prefix for the Slurm install paths searched (tests)")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--out", default=SLURM_PROM_FILE, help="textfile to write ('-' for stdout)")
    args = ap.parse_args(argv)
    sinfo = args.sinfo or find_sinfo(args.root)
    if sinfo is None:
        print("slurm_textfile: no sinfo in /opt/slurm/bin, /opt/aws/pcs/scheduler/slurm-*/bin or PATH",
              file=sys.stderr)
    nodes = run_sinfo(sinfo, args.timeout) if sinfo else None
    # squeue sits beside sinfo in every Slurm install; its running jobs name the nodes each job holds
    squeue = os.path.join(os.path.dirname(sinfo), "squeue") if sinfo else None
    jobs = run_squeue(squeue, args.timeout) if squeue and os.access(squeue, os.X_OK) else None
    return emit(render(nodes, jobs), args.out, "slurm_textfile")


if __name__ == "__main__":
    sys.exit(main())

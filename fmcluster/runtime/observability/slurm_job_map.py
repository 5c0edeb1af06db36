"""Which Slurm job holds each GPU, for dcgm-exporter's HPC job mapping (its series get an ``hpc_job`` label).

    python3 -m fmcluster.runtime.observability.slurm_job_map prolog|epilog [--dir DIR]
    python3 -m fmcluster.runtime.observability.slurm_job_map hooks [--hook-dir DIR] [--shim PROLOG EPILOG]
    python3 -m fmcluster.runtime.observability.slurm_job_map register --conf SLURM_CONF [--hook-dir DIR]

Run as Slurm's node ``Prolog`` and ``Epilog`` (slurm.conf; both run as root on each node of the job). dcgm-exporter,
started with ``--hpc-job-mapping-dir DIR``, reads one file per GPU named after the GPU's index whose lines are the
job ids on it (dcgm-exporter README, "Enabling HPC Job Mapping"). The prolog writes ``DIR/<index>`` with
``SLURM_JOB_ID`` for every GPU in ``SLURM_JOB_GPUS`` (Slurm sets it in the prolog and epilog to the job's GPU
indices; Slurm prolog and epilog guide); without it (no GPU GRES configured) the job is given every GPU of the node,
as fmcluster's GPU jobs take nodes whole. The epilog removes the files that name its job.

Never fails the job: a prolog that exits non-zero drains the node (slurm.conf, Prolog), so every problem is printed
to stderr and the exit status is 0. Files are written whole (temporary file, then rename).

``hooks`` writes the two executables Slurm runs (HOOK_DIR/prolog.sh, epilog.sh): Slurm gives a prolog no PATH and
drains the node when its program is missing or fails (Slurm's prep/script plugin: a path or glob that matches
nothing is an error), so each names this interpreter and the package by absolute path, bounds the run and exits 0.
``--shim`` also writes scripts that run those hooks when the node has them and succeed when it has not: for a
directory Slurm runs from every node, such as ParallelCluster's shared prolog.d.

``register`` names the hooks as Prolog and Epilog in a slurm.conf that sets neither (a service's own Prolog is kept):
prints ``changed`` or ``unchanged``; the caller reconfigures Slurm.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shlex
import sys
import tempfile
from typing import List, Mapping, Optional, Tuple

from fmcluster.runtime.slurm_hooks import shim_script, write_executable

JOB_MAP_DIR = "/run/fmcluster/dcgm-job-map"
HOOK_DIR = "/opt/fmcluster/slurm"
HOOK_TIMEOUT_S = 30  # well inside Slurm's PrologEpilogTimeout and ParallelCluster's BatchStartTimeout (180 s)
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")  # a job id, or an array task's <job>_<task>


def node_gpus(dev: str = "/dev") -> List[str]:
    """The node's GPU indices from its /dev/nvidiaN device files."""
    found = [os.path.basename(p)[len("nvidia"):] for p in glob.glob(os.path.join(dev, "nvidia[0-9]*"))]
    return sorted((g for g in found if g.isdigit()), key=int)


def job_gpus(env: Mapping[str, str], dev: str = "/dev") -> List[str]:
    raw = (env.get("SLURM_JOB_GPUS") or "").strip()
    if not raw:
        return node_gpus(dev)
    gpus = [g.strip() for g in raw.split(",") if g.strip()]
    return [g for g in gpus if g.isdigit()]


def _write(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".job-map-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def prolog(job: str, gpus: List[str], directory: str) -> List[str]:
    os.makedirs(directory, mode=0o755, exist_ok=True)
    for gpu in gpus:
        _write(os.path.join(directory, gpu), job + "\n")
    return gpus


def epilog(job: str, directory: str) -> List[str]:
    removed = []
    for path in glob.glob(os.path.join(directory, "[0-9]*")):
        try:
            with open(path) as f:
                lines = [line.strip() for line in f]
        except OSError:
            continue
        if job in lines:
            os.unlink(path)
            removed.append(os.path.basename(path))
    return sorted(removed, key=int)


def hook_path(action: str, hook_dir: str = HOOK_DIR) -> str:
    """Where `hooks` writes the program Slurm runs as `action` (prolog | epilog): what a Prolog= setting names."""
    return os.path.join(hook_dir, f"{action}.sh")


def hook_script(action: str, *, python: str, pkg_root: str, directory: str) -> str:
    """The program Slurm runs as Prolog or Epilog: this module under a timeout, its complaints to the journal."""
    python, pkg_root, directory = (shlex.quote(v) for v in (python, pkg_root, directory))
    return f"""#!/bin/sh
# fmcluster: Slurm {action} that keeps dcgm-exporter's GPU -> job map (fmcluster.runtime.observability.slurm_job_map).
# It always exits 0: a failing {action} drains the node. Slurm runs it without PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
out=$(PYTHONPATH={pkg_root} timeout -k 5 {HOOK_TIMEOUT_S} {python} -m fmcluster.runtime.observability.slurm_job_map \\
  {action} --dir {directory} 2>&1) || out="$out (exit $?)"
[ -z "$out" ] || logger -t fmcluster-job-map -- "$(printf '%s' "$out" | head -c 2000)" 2>/dev/null
exit 0
"""


def write_hooks(hook_dir: str = HOOK_DIR, *, python: str = sys.executable, directory: str = JOB_MAP_DIR,
                shims: Optional[List[str]] = None) -> List[str]:
    """Write HOOK_DIR/prolog.sh and epilog.sh (and with `shims` [prolog path, epilog path] their shims); returns
    the paths written."""
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    written = []
    for action in ("prolog", "epilog"):
        path = hook_path(action, hook_dir)
        write_executable(path, hook_script(action, python=python, pkg_root=pkg_root, directory=directory))
        written.append(path)
    for action, shim in zip(("prolog", "epilog"), shims or []):
        write_executable(shim, shim_script(f"{action} hook", hook_path(action, hook_dir)))
        written.append(shim)
    return written


REGISTERED = "# fmcluster: dcgm-exporter's GPU -> Slurm job map (fmcluster.runtime.observability.slurm_job_map)"
_SETTING = re.compile(r"^[ \t]*(prolog|epilog)[ \t]*=", re.I | re.M)  # not PrologFlags, PrologSlurmctld


def registered(conf: str, hook_dir: str = HOOK_DIR) -> Tuple[str, List[str]]:
    """`conf` (slurm.conf text) with Prolog and Epilog naming the hooks, and the settings it already had and keeps."""
    if REGISTERED in conf:
        return conf, []
    kept = sorted({m.group(1).capitalize() for m in _SETTING.finditer(conf)})
    lines = [f"{a}={hook_path(a.lower(), hook_dir)}" for a in ("Prolog", "Epilog") if a not in kept]
    if not lines:
        return conf, kept
    sep = "\n" if conf and not conf.endswith("\n") else ""
    return conf + sep + "\n".join([REGISTERED, *lines]) + "\n", kept


def register(conf_path: str, hook_dir: str = HOOK_DIR) -> bool:
    """Register the hooks in slurm.conf at `conf_path` (rewritten whole, owner and mode kept); True when changed."""
    with open(conf_path) as f:
        conf = f.read()
    text, kept = registered(conf, hook_dir)
    for setting in kept:
        print(f"slurm_job_map: {conf_path} sets {setting} already; left as it is", file=sys.stderr)
    if text == conf:
        return False
    st = os.stat(conf_path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(conf_path), prefix=".slurm.conf.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, st.st_mode & 0o7777)
        if os.geteuid() == 0:
            os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, conf_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return True


def main(argv: Optional[List[str]] = None, env: Optional[Mapping[str, str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="slurm_job_map", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("prolog", "epilog", "hooks", "register"))
    ap.add_argument("--dir", default=JOB_MAP_DIR)
    ap.add_argument("--dev", default="/dev", help=argparse.SUPPRESS)
    ap.add_argument("--hook-dir", default=HOOK_DIR)
    ap.add_argument("--shim", nargs=2, metavar=("PROLOG", "EPILOG"))
    ap.add_argument("--conf", help="slurm.conf (register)")
    args = ap.parse_args(argv)
    if args.action == "register":
        if not args.conf:
            ap.error("register needs --conf")
        try:
            print("changed" if register(args.conf, args.hook_dir) else "unchanged")
        except OSError as e:
            print(f"slurm_job_map: register in {args.conf}: {e}", file=sys.stderr)
            return 1
        return 0
    if args.action == "hooks":
        try:
            for path in write_hooks(args.hook_dir, directory=args.dir, shims=args.shim):
                print(path)
        except OSError as e:
            print(f"slurm_job_map: hooks: {e}", file=sys.stderr)
            return 1
        return 0
    env = dict(os.environ) if env is None else env
    job = (env.get("SLURM_JOB_ID") or "").strip()
    if not _JOB_ID.match(job):
        print(f"slurm_job_map: SLURM_JOB_ID {job!r} is not a job id; nothing written", file=sys.stderr)
        return 0
    try:
        if args.action == "prolog":
            prolog(job, job_gpus(env, args.dev), args.dir)
        else:
            epilog(job, args.dir)
    except OSError as e:
        print(f"slurm_job_map: {args.action} for job {job}: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which Slurm job holds each GPU, for dcgm-exporter's HPC job mapping (its series get an ``hpc_job`` label).

    python3 -m fmcluster.runtime.observability.slurm_job_map prolog|epilog [--dir DIR]

Run as Slurm's node ``Prolog`` and ``Epilog`` (slurm.conf; both run as root on each node of the job). dcgm-exporter,
started with ``--hpc-job-mapping-dir DIR``, reads one file per GPU named after the GPU's index whose lines are the
job ids on it (dcgm-exporter README, "Enabling HPC Job Mapping"). The prolog writes ``DIR/<index>`` with
``SLURM_JOB_ID`` for every GPU in ``SLURM_JOB_GPUS`` (Slurm sets it in the prolog and epilog to the job's GPU
indices; Slurm prolog and epilog guide); without it (no GPU GRES configured) the job is given every GPU of the node,
as fmcluster's GPU jobs take nodes whole. The epilog removes the files that name its job.

Never fails the job: a prolog that exits non-zero drains the node (slurm.conf, Prolog), so every problem is printed
to stderr and the exit status is 0. Files are written whole (temporary file, then rename).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import tempfile
from typing import List, Mapping, Optional

JOB_MAP_DIR = "/run/fmcluster/dcgm-job-map"
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


def main(argv: Optional[List[str]] = None, env: Optional[Mapping[str, str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="slurm_job_map", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("prolog", "epilog"))
    ap.add_argument("--dir", default=JOB_MAP_DIR)
    ap.add_argument("--dev", default="/dev", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
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

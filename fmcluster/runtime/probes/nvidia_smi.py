"""nvidia-smi probes: the one GPU query shared by the standard-level checks, ``nvlink -s`` and ``topo -m``.

Each command runs once per validation (Node.run caches it) and is parsed strictly: output not understood is a
ProbeError, so the check asking ends in ``error``, never in a wrong ``pass``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from ..context import Ctx
from ..node import ProbeError, capture, unwrap

QUERY_FIELDS = (
    "index", "name", "pci.bus_id", "driver_version", "persistence_mode", "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total", "remapped_rows.pending", "remapped_rows.failure", "mig.mode.current",
    "fabric.state", "fabric.status",
)
QUERY_ARGV = ("nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader")
FABRIC_ARGV = ("nvidia-smi", "--query-gpu=index,fabric.state,fabric.status", "--format=csv,noheader")
NVLINK_ARGV = ("nvidia-smi", "nvlink", "-s")
TOPOLOGY_ARGV = ("nvidia-smi", "topo", "-m")
_SMI_NOISE = re.compile(r"Unable to determine the device handle|Unknown Error|GPU is lost|No devices were found", re.I)
_GPU = re.compile(r"GPU\d+")


def parse_csv(text: str, fields: Tuple[str, ...]) -> Tuple[List[Dict[str, str]], List[str]]:
    """Rows of a --format=csv,noheader answer and the nvidia-smi error lines in it; ProbeError if garbled."""
    rows: List[Dict[str, str]] = []
    errors: List[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(", ")]
        if len(cells) == len(fields) and cells[0].isdigit():
            rows.append(dict(zip(fields, cells)))
        elif _SMI_NOISE.search(line):
            errors.append(line.strip())
        else:
            raise ProbeError(f"nvidia-smi output not understood: {line.strip()[:120]!r}")
    if not rows and not errors:
        raise ProbeError("nvidia-smi printed nothing")
    return rows, errors


def gpu_rows(ctx: Ctx) -> Tuple[List[Dict[str, str]], List[str]]:
    """One row per GPU of the QUERY_FIELDS query, and the error lines nvidia-smi printed for lost GPUs."""
    def probe() -> Tuple[List[Dict[str, str]], List[str]]:
        res = ctx.node.run(QUERY_ARGV)
        if res.error:
            raise ProbeError(res.why())
        if res.rc != 0 and not _SMI_NOISE.search(res.stdout + res.stderr):
            raise ProbeError(res.why())
        return parse_csv(res.stdout + ("\n" + res.stderr if res.rc != 0 else ""), QUERY_FIELDS)

    result = ctx.memo("nvsmi.query", lambda: capture(probe))
    return unwrap(result)


def parse_nvlink_status(text: str) -> Dict[str, List[str]]:
    """GPU index -> the state of each of its links ("26.562 GB/s" when up) from `nvidia-smi nvlink -s`."""
    per_gpu: Dict[str, List[str]] = {}
    cur = None
    for line in text.splitlines():
        g = re.match(r"GPU (\d+):", line)
        if g:
            cur = g.group(1)
            per_gpu[cur] = []
            continue
        lk = re.match(r"\s+Link (\d+): (.+)$", line)
        if lk and cur is not None:
            per_gpu[cur].append(lk.group(2).strip())
        elif line.strip() and cur is None:
            raise ProbeError(f"nvidia-smi nvlink -s output not understood: {line.strip()[:100]!r}")
    if not per_gpu:
        raise ProbeError("nvidia-smi nvlink -s printed no GPU")
    return per_gpu


def nvlink_status(ctx: Ctx) -> Dict[str, List[str]]:
    return parse_nvlink_status(ctx.node.run(NVLINK_ARGV).require())


def parse_topology(text: str) -> Tuple[List[str], List[Tuple[str, Dict[str, str]]]]:
    """The GPU columns of `nvidia-smi topo -m` and, per GPU row, its cell under each GPU column ("X", "NV18", ...)."""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()
    header = next((ln for ln in lines if re.match(r"^\s+GPU0\b", ln)), None)
    if header is None:
        raise ProbeError("nvidia-smi topo -m: no GPU header line")
    cols = header.split()
    gpu_cols = [i for i, c in enumerate(cols) if _GPU.fullmatch(c)]
    rows: List[Tuple[str, Dict[str, str]]] = []
    for ln in lines:
        cells = ln.split("\t") if "\t" in ln else ln.split()
        if not cells or not _GPU.fullmatch(cells[0].strip()):
            continue
        vals = [c.strip() for c in cells[1:]]
        rows.append((cells[0].strip(), {cols[i]: vals[i] for i in gpu_cols if i < len(vals)}))
    return [cols[i] for i in gpu_cols], rows


def topology_matrix(ctx: Ctx) -> Tuple[List[str], List[Tuple[str, Dict[str, str]]]]:
    return parse_topology(ctx.node.run(TOPOLOGY_ARGV).require())

"""Shared nvidia-smi and kernel-log probes (run once per validation, parsed strictly)."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ..probes import ProbeError
from . import Ctx

QUERY_FIELDS = (
    "index", "name", "pci.bus_id", "driver_version", "persistence_mode", "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total", "remapped_rows.pending", "remapped_rows.failure", "mig.mode.current",
    "fabric.state", "fabric.status",
)
QUERY_ARGV = ("nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader")
FABRIC_ARGV = ("nvidia-smi", "--query-gpu=index,fabric.state,fabric.status", "--format=csv,noheader")
_SMI_NOISE = re.compile(r"Unable to determine the device handle|Unknown Error|GPU is lost|No devices were found", re.I)


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
    def probe() -> Tuple[List[Dict[str, str]], List[str]]:
        res = ctx.node.run(QUERY_ARGV)
        if res.error:
            raise ProbeError(res.why())
        if res.rc != 0 and not _SMI_NOISE.search(res.stdout + res.stderr):
            raise ProbeError(res.why())
        return parse_csv(res.stdout + ("\n" + res.stderr if res.rc != 0 else ""), QUERY_FIELDS)

    result = ctx.memo("nvsmi.query", lambda: _capture(probe))
    return _unwrap(result)


def _capture(fn):  # type: ignore[no-untyped-def]
    try:
        return ("ok", fn())
    except ProbeError as exc:
        return ("err", exc)


def _unwrap(result):  # type: ignore[no-untyped-def]
    kind, value = result
    if kind == "err":
        raise ProbeError(str(value))
    return value


def kernel_module_version(ctx: Ctx) -> Optional[str]:
    v = ctx.node.read_or("/sys/module/nvidia/version")
    if v and v.strip():
        return v.strip()
    text = ctx.node.read_or("/proc/driver/nvidia/version") or ""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


# ---- kernel log: Xid / SXid -------------------------------------------------------------------------

XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+),\s*(.*)")
SXID_RE = re.compile(r"SXid \(PCI:([0-9a-fA-F:.]+)\): (\d+), (Non-fatal|Fatal)", re.I)
OFF_BUS_RE = re.compile(r"fallen off the bus", re.I)
OFF_BUS_GPU_RE = re.compile(r"NVIDIA GPU ([0-9a-fA-F:.]+)")

# class -> failing? ; per NVIDIA Xid catalog: what the operator has to do.
XID_CLASSES: Dict[int, Tuple[str, str]] = {
    13: ("app", "graphics engine exception (usually the application)"),
    31: ("app", "GPU memory page fault (usually the application)"),
    43: ("app", "GPU stopped processing (application fault)"),
    45: ("app", "preemptive cleanup after an earlier error"),
    48: ("reset", "double-bit ECC error"),
    61: ("reset", "internal micro-controller breakpoint"),
    62: ("reset", "internal micro-controller halt"),
    63: ("reset", "row remapping recorded, GPU reset needed to activate it"),
    64: ("rma", "row remapping failed"),
    74: ("reset", "NVLink error"),
    79: ("reboot", "GPU has fallen off the bus"),
    92: ("monitor", "high single-bit ECC error rate"),
    94: ("reset", "contained ECC error"),
    95: ("reset", "uncontained ECC error"),
    119: ("reboot", "GSP RPC timeout"),
    120: ("reboot", "GSP error"),
    121: ("reset", "C2C link error"),
    140: ("reset", "unrecovered ECC error"),
    143: ("reboot", "GPU initialization failure"),
    154: ("reset", "GPU recovery action requested"),
}
for _x in range(144, 151):
    XID_CLASSES[_x] = ("reset", "NVLink error")
FAILING_CLASSES = ("reset", "reboot", "rma")
ACTION = {"app": "restart the job", "monitor": "watch the GPU", "reset": "drain the node and reset the GPU",
          "reboot": "drain and reboot the node (replace it if it repeats)", "rma": "drain and replace the node"}


def classify_xid(xid: int, text: str) -> Tuple[str, str]:
    cls, what = XID_CLASSES.get(xid, ("unknown", "unclassified Xid"))
    if xid == 154:
        m = re.search(r"\(([^)]*)\)\s*$", text.strip())
        action = (m.group(1) if m else "").lower()
        if "none" in action:
            return "monitor", "GPU recovery action cleared"
        if "reboot" in action:
            return "reboot", f"GPU recovery action: {m.group(1) if m else '?'}"
    return cls, what


def kernel_events(ctx: Ctx) -> List[Dict[str, str]]:
    """Xid/SXid/fallen-off-bus events of this boot from /dev/kmsg (read non-blocking)."""
    def probe() -> List[Dict[str, str]]:
        text = ctx.node.read_bytes_nonblocking("/dev/kmsg")
        events: List[Dict[str, str]] = []
        last_gpu = "?"
        for line in text.splitlines():
            g = OFF_BUS_GPU_RE.search(line)
            if g:
                last_gpu = g.group(1)
            m = XID_RE.search(line)
            if m:
                xid = int(m.group(2))
                cls, what = classify_xid(xid, m.group(3))
                events.append({"kind": "Xid", "code": str(xid), "pci": m.group(1), "class": cls, "what": what})
                continue
            m = SXID_RE.search(line)
            if m:
                fatal = m.group(3).lower() == "fatal"
                events.append({"kind": "SXid", "code": m.group(2), "pci": m.group(1),
                               "class": "reset" if fatal else "monitor", "what": m.group(3)})
                continue
            if OFF_BUS_RE.search(line):
                events.append({"kind": "Xid", "code": "79", "pci": last_gpu, "class": "reboot",
                               "what": "GPU has fallen off the bus"})
        return events

    return _unwrap(ctx.memo("kmsg", lambda: _capture(probe)))

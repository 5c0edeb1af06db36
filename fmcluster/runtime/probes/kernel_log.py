"""Kernel-log probe: Xid / SXid / fallen-off-the-bus events of this boot, read from /dev/kmsg and classified."""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from ..context import Ctx
from ..node import capture, unwrap

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


def parse_kernel_events(text: str) -> List[Dict[str, str]]:
    """Xid/SXid/fallen-off-bus events ({"kind", "code", "pci", "class", "what"}) in kernel log text."""
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


def kernel_events(ctx: Ctx) -> List[Dict[str, str]]:
    """Xid/SXid/fallen-off-bus events of this boot from /dev/kmsg (read non-blocking)."""
    def probe() -> List[Dict[str, str]]:
        return parse_kernel_events(ctx.node.read_bytes_nonblocking("/dev/kmsg"))

    return unwrap(ctx.memo("kmsg", lambda: capture(probe)))

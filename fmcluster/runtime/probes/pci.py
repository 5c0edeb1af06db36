"""PCI probes: NVIDIA GPUs on the bus and the PCIe link state of GPUs and EFA devices (sysfs only)."""

from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Tuple

from ..context import Ctx
from ..profile import has_efa, has_gpus
from .efa import efa_devices

NVIDIA = "0x10de"


def gpu_bdfs(ctx: Ctx) -> List[str]:
    """PCI addresses of the NVIDIA 3D controllers (vendor 0x10de, class 0x0302xx) under /sys/bus/pci/devices."""
    def probe() -> List[str]:
        found: List[str] = []
        for dev in ctx.node.listdir("/sys/bus/pci/devices"):
            base = f"/sys/bus/pci/devices/{dev}"
            vendor = (ctx.node.read_or(base + "/vendor") or "").strip().lower()
            klass = (ctx.node.read_or(base + "/class") or "").strip().lower()
            if vendor == NVIDIA and klass.startswith("0x0302"):
                found.append(dev)
        return found
    return list(ctx.memo("gpu_bdfs", probe))


# PCIe link state, /sys/bus/pci/devices/<bdf>/{current,max}_link_{width,speed} (drivers/pci/pci-sysfs.c): widths are
# decimal lane counts ("16"); speeds come from pci_speed_string() (drivers/pci/probe.c): "2.5 GT/s PCIe" ...
# "32.0 GT/s PCIe", "64.0 GT/s PCIe", or "Unknown"; kernels up to 5.6 print "8 GT/s", "16 GT/s" (NCCL's topo.c reads
# both forms). A width of 0 or an "Unknown" speed means the device does not report its link (e.g. some virtual
# functions): not a fault.
LINK_FILES = ("current_link_width", "max_link_width", "current_link_speed", "max_link_speed")


def _gts(text: str) -> float:
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*GT/s", text)
    return float(m.group(1)) if m else 0.0


def _lanes(text: str) -> int:
    t = text.strip().lstrip("x")
    return int(t) if t.isdigit() else 0


class Link(NamedTuple):
    kind: str  # GPU | EFA
    name: str  # PCI address for a GPU, rdmap* name for an EFA device
    bdf: str
    raw: Dict[str, str]  # the four sysfs values as read ("" when missing)

    @property
    def widths(self) -> Tuple[int, int]:
        return _lanes(self.raw["current_link_width"]), _lanes(self.raw["max_link_width"])

    @property
    def speeds(self) -> Tuple[float, float]:
        return _gts(self.raw["current_link_speed"]), _gts(self.raw["max_link_speed"])

    def label(self) -> str:
        return f"{self.kind} {self.name}" if self.name == self.bdf else f"{self.kind} {self.name} ({self.bdf})"


def pcie_links(ctx: Ctx) -> List[Link]:
    """Link state of every GPU (gpu_bdfs) and EFA device (efa_devices, through /sys/class/infiniband/<dev>/device)."""
    where: List[Tuple[str, str, str, str]] = []
    if has_gpus(ctx.profile):
        where += [("GPU", b, b, f"/sys/bus/pci/devices/{b}") for b in gpu_bdfs(ctx)]
    if has_efa(ctx.profile):
        for d in efa_devices(ctx):
            path = f"/sys/class/infiniband/{d}/device"
            where.append(("EFA", d, ctx.node.link_name(path) or d, path))
    return [Link(kind, name, bdf, {f: (ctx.node.read_or(f"{path}/{f}") or "").strip() for f in LINK_FILES})
            for kind, name, bdf, path in where]

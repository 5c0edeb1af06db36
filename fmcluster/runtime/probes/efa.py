"""EFA device probe: /sys/class/infiniband devices bound to the efa driver."""

from __future__ import annotations

from typing import List

from ..context import Ctx


def efa_devices(ctx: Ctx) -> List[str]:
    """/sys/class/infiniband devices bound to the efa driver (NVLink/NVSwitch ibp* mlx5 devices excluded)."""
    devs = []
    for d in ctx.node.listdir("/sys/class/infiniband"):
        if d.startswith("ibp"):
            continue
        if ctx.node.link_name(f"/sys/class/infiniband/{d}/device/driver") == "efa":
            devs.append(d)
    return devs

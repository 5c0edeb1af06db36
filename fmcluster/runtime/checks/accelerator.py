"""Layer 2: accelerator runtime and libraries (CUDA vs driver, DCGM)."""

from __future__ import annotations

import re

from .. import versions
from ..probes import ProbeError
from ..probes.installed import file_versions
from . import Ctx, Result, bad, check, has_gpus, ok, skip


@check("acc.cuda", "accelerator", applies=has_gpus, title="CUDA toolkit present, supported by the driver, >= minimum")
def cuda(ctx: Ctx) -> Result:
    v = file_versions(ctx)
    cu, drv = v["cuda"], v["driver"]
    want = ctx.profile.min_versions.get("cuda")
    if not cu:
        if ctx.profile.is_optional("cuda"):
            return skip("no CUDA toolkit in /usr/local/cuda (optional)")
        return bad("no /usr/local/cuda/version.json", f">= {want}" if want else "present",
                   "install the CUDA toolkit (or use the DLAMI) and link /usr/local/cuda")
    problems = []
    if drv:
        good, why = versions.cuda_driver_ok(cu, drv)
        if not good:
            problems.append(f"{why}, driver is {drv}")
    gap = ctx.profile.version_gap("cuda", cu)
    if gap:
        problems.append(f"CUDA {gap}")
    observed = f"CUDA {cu}, driver {drv or '?'}"
    if problems:
        return bad(observed, f">= {want}" if want else "supported", "install a CUDA/driver pair from the known-good bundle",
                   "; ".join(problems))
    return ok(observed, f">= {want}" if want else "supported")


@check("acc.dcgm", "accelerator", level="standard", applies=has_gpus, title="DCGM installed, >= minimum")
def dcgm(ctx: Ctx) -> Result:
    res = ctx.node.run(("dcgmi", "--version"))
    want = ctx.profile.min_versions.get("dcgm")
    if res.error == "not found on PATH" and ctx.profile.is_optional("dcgm"):
        return skip("dcgmi not installed (optional)")
    out = res.require()
    m = re.search(r"version\s*:?\s*(\d+\.\d+(?:\.\d+)?)", out, re.I)
    if not m:
        raise ProbeError(f"dcgmi --version output not understood: {out.strip()[:100]!r}")
    got = m.group(1)
    gap = ctx.profile.version_gap("dcgm", got)
    if gap:
        return bad(got, f">= {want}" if want else "present",
                   "install DCGM from the known-good bundle (datacenter-gpu-manager-4)", gap)
    return ok(got, f">= {want}" if want else "present")

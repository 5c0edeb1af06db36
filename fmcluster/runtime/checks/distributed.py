"""Layer 5: distributed frameworks — NCCL, cross-layer version rules, pinned versions; at the deep level a
single-node NCCL all-reduce."""

from __future__ import annotations

import re

from .. import versions
from ..node import ProbeError
from ..probes.installed import file_versions, libfabric_version
from .registry import Ctx, Result, bad, check, has_gpus, ok, skip, version_verdict, warn


@check("dist.nccl", "distributed", applies=has_gpus, required=False, title="NCCL library version")
def nccl(ctx: Ctx) -> Result:
    got, want = file_versions(ctx)["nccl"], ctx.profile.min_versions.get("nccl")
    if not got:
        return warn("no system libnccl.so.2 or nvidia-nccl wheel found", f">= {want}" if want else "present",
                    "jobs must bring NCCL (torch wheels do); install libnccl2 for nccl-tests")
    return version_verdict(ctx, "nccl", got, got, "install a newer NCCL (libnccl2) that supports this GPU")


@check("dist.compat", "distributed", applies=has_gpus, title="Cross-layer version rules (aws-ofi-nccl/libfabric/EFA/NCCL)")
def compat(ctx: Ctx) -> Result:
    v = dict(file_versions(ctx))
    v["libfabric"] = libfabric_version(ctx)
    seen = {k: v[k] for k in ("cuda", "efa_installer", "libfabric", "aws_ofi_nccl", "nccl") if v.get(k)}
    problems = versions.compatibility_problems(v, str(ctx.profile.fact("family", "")))
    observed = ", ".join(f"{k} {x}" for k, x in seen.items()) or "no versions found"
    if problems:
        return bad(observed, "compatible", "install a matching set (the known-good DLAMI bundle)", "; ".join(problems))
    return ok(observed, "compatible")


@check("versions.pinned", "distributed", title="Pinned versions match exactly")
def pinned(ctx: Ctx) -> Result:
    pins = ctx.profile.pinned_versions
    if not pins:
        return skip("no pinned versions in the profile")
    v = dict(file_versions(ctx))
    v["libfabric"] = libfabric_version(ctx)
    wrong = [f"{k} {v.get(k) or 'missing'} != {want}" for k, want in sorted(pins.items())
             if k in v and not versions.same(v.get(k), want)]
    if wrong:
        return bad("; ".join(wrong), pins, "install the pinned versions (or update the profile)")
    return ok({k: v.get(k) for k in pins}, pins)


# ---- deep ----------------------------------------------------------------------------------------------------------

@check("deep.nccl_allreduce", "distributed", level="deep", applies=lambda p: int(p.fact("gpus", 0)) > 1,
       title="Single-node NCCL all-reduce bus bandwidth")
def nccl_allreduce(ctx: Ctx) -> Result:
    n = str(int(ctx.profile.fact("gpus")))
    res = ctx.node.run(("all_reduce_perf", "-b", "1G", "-e", "4G", "-f", "2", "-g", n), timeout=300)
    out = res.require()
    rows = re.findall(r"^\S*\s*(\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+(\S+)", out, re.M)
    if not rows:
        raise ProbeError(f"all_reduce_perf output not understood: {out.strip()[-160:]!r}")
    size, busbw, wrong = rows[-1]
    floor = ctx.profile.threshold("allreduce_busbw_gbps")
    observed = f"{float(busbw):.0f} GB/s at {int(size) >> 20} MiB"
    if wrong not in ("0", "N/A"):
        return bad(observed + f", {wrong} wrong", "0 wrong", "NCCL produced wrong results: drain and diagnose GPUs")
    if float(busbw) < floor:
        return bad(observed, f">= {floor} GB/s", "NVLink/NVSwitch under-performs: check nvlink -s, fabric manager")
    return ok(observed, f">= {floor} GB/s")

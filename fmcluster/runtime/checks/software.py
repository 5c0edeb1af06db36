"""Layers 4 and 5: ML framework and distributed frameworks (NCCL, cross-layer version rules)."""

from __future__ import annotations

from .. import versions
from ..probes.installed import file_versions, libfabric_version
from . import Ctx, Result, bad, check, has_gpus, ok, skip, warn


@check("fw.torch", "framework", applies=has_gpus, title="PyTorch installed, built for a CUDA the driver supports")
def torch(ctx: Ctx) -> Result:
    v = file_versions(ctx)
    got, want = v["torch"], ctx.profile.min_versions.get("torch")
    if not got:
        if ctx.profile.is_optional("torch") and not want:
            return skip("no torch in the system site-packages (optional; jobs may bring their own in a container)")
        return bad("not installed", f">= {want}" if want else "installed", "install PyTorch (or use the DLAMI conda env)")
    problems = []
    gap = ctx.profile.version_gap("torch", got)
    if gap:
        problems.append(f"torch {gap}")
    if v["torch_cuda"] and v["driver"]:
        good, why = versions.cuda_driver_ok(v["torch_cuda"], v["driver"])
        if not good:
            problems.append(f"torch is built for CUDA {v['torch_cuda']}: {why}, driver is {v['driver']}")
    if problems:
        return bad(got, f">= {want}" if want else "compatible", "install a torch build matching the driver",
                   "; ".join(problems))
    return ok(got, f">= {want}" if want else "compatible")


@check("dist.nccl", "distributed", applies=has_gpus, required=False, title="NCCL library version")
def nccl(ctx: Ctx) -> Result:
    got, want = file_versions(ctx)["nccl"], ctx.profile.min_versions.get("nccl")
    if not got:
        return warn("no system libnccl.so.2 or nvidia-nccl wheel found", f">= {want}" if want else "present",
                    "jobs must bring NCCL (torch wheels do); install libnccl2 for nccl-tests")
    gap = ctx.profile.version_gap("nccl", got)
    if gap:
        return bad(got, f">= {want}" if want else "present", "install NCCL from the known-good bundle", gap)
    return ok(got, f">= {want}" if want else "present")


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

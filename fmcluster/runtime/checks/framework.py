"""Layer 4: ML framework (PyTorch present and built for a CUDA the driver supports)."""

from __future__ import annotations

from .. import versions
from ..probes.installed import file_versions
from .registry import Ctx, Result, bad, check, has_gpus, skip, version_verdict


@check("fw.torch", "framework", applies=has_gpus, title="PyTorch installed, built for a CUDA the driver supports")
def torch(ctx: Ctx) -> Result:
    v = file_versions(ctx)
    got, want = v["torch"], ctx.profile.min_versions.get("torch")
    if not got:
        if ctx.profile.is_optional("torch") and not want:
            return skip("no torch in the system site-packages (optional; jobs may bring their own in a container)")
        return bad("not installed", f">= {want}" if want else "installed", "install PyTorch (or use the DLAMI conda env)")
    problems = []
    if v["torch_cuda"] and v["driver"]:
        good, why = versions.cuda_driver_ok(v["torch_cuda"], v["driver"])
        if not good:
            problems.append(f"torch is built for CUDA {v['torch_cuda']}: {why}, driver is {v['driver']}")
    return version_verdict(ctx, "torch", got, got, "install a torch build matching the driver", problems)

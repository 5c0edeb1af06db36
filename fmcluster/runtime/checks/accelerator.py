"""Layer 2: accelerator runtime and libraries (CUDA vs driver, DCGM); at the deep level the DCGM diagnostic and
GEMM / HBM bandwidth against the catalog peaks."""

from __future__ import annotations

import json
import os
import re

from .. import versions
from ..node import ProbeError
from ..probes.installed import file_versions
from .registry import Ctx, Result, bad, check, has_gpus, ok, skip, version_verdict, warn

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpu_bench.py")


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
    return version_verdict(ctx, "cuda", cu, f"CUDA {cu}, driver {drv or '?'}",
                           "install a CUDA toolkit and driver pair that support this GPU", problems)


@check("acc.dcgm", "accelerator", level="standard", applies=has_gpus, title="DCGM installed, >= minimum")
def dcgm(ctx: Ctx) -> Result:
    res = ctx.node.run(("dcgmi", "--version"))
    if res.error == "not found on PATH" and ctx.profile.is_optional("dcgm"):
        return skip("dcgmi not installed (optional)")
    out = res.require()
    m = re.search(r"version\s*:?\s*(\d+\.\d+(?:\.\d+)?)", out, re.I)
    if not m:
        raise ProbeError(f"dcgmi --version output not understood: {out.strip()[:100]!r}")
    got = m.group(1)
    return version_verdict(ctx, "dcgm", got, got, "install a newer DCGM (datacenter-gpu-manager-4)")


# ---- deep ----------------------------------------------------------------------------------------------------------

@check("deep.dcgm_diag", "accelerator", level="deep", applies=has_gpus, title="DCGM diagnostic level 2")
def dcgm_diag(ctx: Ctx) -> Result:
    res = ctx.node.run(("dcgmi", "diag", "-r", "2"), timeout=900)
    out = res.stdout
    if res.error:
        raise ProbeError(res.why())
    rows = re.findall(r"^\|\s*([A-Za-z][\w .-]*?)\s*\|\s*(Pass|Fail|Warn|Skip)\b", out, re.M)
    if not rows:
        raise ProbeError(f"dcgmi diag output not understood (exit {res.rc}): {out.strip()[:120]!r}")
    failed = sorted({name for name, r in rows if r == "Fail"})
    warned = sorted({name for name, r in rows if r == "Warn"})
    observed = f"{len(rows)} results; fail: {', '.join(failed) or 'none'}; warn: {', '.join(warned) or 'none'}"
    if failed:
        return bad(observed, "all Pass", "drain the node; read dcgmi diag details and reset/replace the GPU")
    if warned:
        return warn(observed, "all Pass", "review the DCGM warnings")
    return ok(observed, "all Pass")


def _gpu_bench(ctx: Ctx) -> dict:  # type: ignore[type-arg]
    def probe():  # type: ignore[no-untyped-def]
        python = os.environ.get("FMCLUSTER_TORCH_PYTHON", "python3")
        res = ctx.node.run((python, BENCH, "--seconds", "2"), timeout=300)
        if res.error:
            return ("err", res.why())
        try:
            data = json.loads(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return ("err", f"gpu_bench output not understood: {res.stdout.strip()[:120]!r} {res.stderr.strip()[-200:]}")
        if "error" in data or "gpus" not in data:
            return ("err", f"gpu_bench: {data.get('error', 'no gpus')}")
        return ("ok", data)

    kind, value = ctx.memo("gpu_bench", probe)
    if kind == "err":
        raise ProbeError(value)
    return value


@check("deep.gemm", "accelerator", level="deep", applies=has_gpus, title="BF16 GEMM TFLOPS per GPU vs catalog peak")
def gemm(ctx: Ctx) -> Result:
    data = _gpu_bench(ctx)
    peak = float(ctx.profile.fact("bf16_dense_tflops"))
    floor = round(peak * ctx.profile.threshold("gemm_fraction"), 1)
    got = {g["index"]: g["bf16_tflops"] for g in data["gpus"]}
    slow = {i: v for i, v in got.items() if v < floor}
    observed = f"min {min(got.values()):.0f} TFLOPS" if got else "no GPU"
    if not got or slow or len(got) != int(ctx.profile.fact("gpus")):
        return bad(observed, f">= {floor} TFLOPS ({ctx.profile.threshold('gemm_fraction'):.0%} of {peak:.0f})",
                   "GPU under-performs: check clocks_event_reasons (thermal/power), reset or replace", str(got))
    return ok(observed, f">= {floor} TFLOPS", str(got))


@check("deep.hbm", "accelerator", level="deep", applies=has_gpus, title="HBM copy bandwidth per GPU vs catalog peak")
def hbm(ctx: Ctx) -> Result:
    data = _gpu_bench(ctx)
    peak = float(ctx.profile.fact("hbm_tbps"))
    floor = round(peak * ctx.profile.threshold("hbm_fraction"), 2)
    got = {g["index"]: g["hbm_tbps"] for g in data["gpus"]}
    slow = {i: v for i, v in got.items() if v < floor}
    observed = f"min {min(got.values()):.2f} TB/s" if got else "no GPU"
    if not got or slow:
        return bad(observed, f">= {floor} TB/s", "HBM bandwidth low: reset the GPU; replace if it repeats", str(got))
    return ok(observed, f">= {floor} TB/s", str(got))

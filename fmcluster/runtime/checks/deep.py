"""Deep level: DCGM diagnostic, GEMM and HBM bandwidth against the catalog, single-node NCCL, EFA loopback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

from ..probes import ProbeError, _kill_group
from . import Ctx, Result, bad, check, has_efa, has_gpus, ok, warn

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpu_bench.py")


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


@check("deep.efa_loopback", "communication", level="deep", applies=has_efa, title="EFA loopback (fi_pingpong)")
def efa_loopback(ctx: Ctx) -> Result:
    argv = ["fi_pingpong", "-p", "efa", "-e", "rdm"]
    exe = shutil.which("fi_pingpong", path=(ctx.node.env or os.environ).get("PATH"))
    if exe is None:
        raise ProbeError("fi_pingpong: not found on PATH")
    server = subprocess.Popen(  # noqa: S603 - list argv, no shell
        [exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env=ctx.node.env,
    )
    try:
        time.sleep(1.0)
        res = ctx.node.run((*argv, "127.0.0.1"), timeout=180, cache=False)
    finally:
        _kill_group(server)
        try:
            server.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    out = res.require()
    m = re.search(r"^\s*\d+\S*\s+\d+\s+=?\d+\s+\S+\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)", out, re.M)
    if not m:
        raise ProbeError(f"fi_pingpong output not understood: {out.strip()[:120]!r}")
    return ok(f"{m.group(1)} MB/sec, {m.group(2)} usec/xfer", "loopback completes")

"""nccl-tests logs written the way nccl-tests v2.19 prints them (src/util.cu: writeDeviceReport, writeResultHeader,
writeBenchmarkLine*, writeResultFooter), from (message size, busbw) pairs: a published series that was published as
numbers only, or a run at another speed. The printf formats are nccl-tests' own, kept as % formats to compare."""

# ruff: noqa: UP031

from __future__ import annotations

from typing import List, Sequence, Tuple

_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "alltoall": lambda n: (n - 1) / n}


def _float(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals, then one, then none, then an exponent, whatever fits the width."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        text = fmt % value
        if len(text) <= width:
            return text
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % value


def log(collective: str, hosts: Sequence[str], gpus_per_host: int, device: str,
        rows: Sequence[Tuple[int, float]]) -> str:
    n = len(hosts) * gpus_per_host
    factor = _FACTOR[collective](n)
    sizes = [s for s, _ in rows]
    out: List[str] = [
        f"== fmcluster nccl-tests: {collective}_perf on {len(hosts)} node(s) ==",
        "# nccl-tests version 2.19.6 nccl-headers=22807 nccl-library=22807",
        f"# Collective test starting: {collective}_perf",
        f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)} step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0 unalign: 0",
        "#", "# Using devices"]
    for rank in range(n):
        host, dev = hosts[rank // gpus_per_host], rank % gpus_per_host
        out.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"
                   % (rank, 0, 40000 + rank, host, dev, 0, 0x53 + 0x11 * dev, 0, device))
    out += ["#",
            "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          " % (("",) * 5),
            "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s" % (
                "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                "#wrong"),
            "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s" % (
                "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")]
    redop = "sum" if collective == "all_reduce" else "none"
    for size, busbw in rows:
        algbw = busbw / factor
        usec = size / (algbw * 1e9) * 1e6 if algbw else 0.0
        placement = "  %7s  %6s  %6s  %6g" % (_float(usec, 7), _float(algbw, 6), _float(busbw, 6), 0)
        out.append("%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", redop, "%6i" % -1) + placement * 2)
    out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {sum(b for _, b in rows) / len(rows):g} ", "#",
            f"# Collective test concluded: {collective}_perf", ""]
    return "\n".join(out)

"""How the fabric job covers a node group, and what that costs in minutes (`fmcluster job nccl --cover`).

- ``all``: each test (all_reduce_perf, alltoall_perf, 8 B to 16 GiB) once across every node. It tests every node, but
  one slow node slows the whole ring and the log cannot say which.
- ``pairs``: all_reduce_perf from 1 GiB to 16 GiB on pairs of nodes, one pair after another: (1,2) (3,4) ..., then
  (2,3) (4,5) ... (N,1), so every node runs with two different partners (an odd last node pairs with the first).
  A slow node fails both its runs; `fmcluster accept` names a host whose every run failed.

`pairs()` is the order nccl-tests.sbatch runs them in (a test runs the script and compares). The estimate is the
transfer time at the fabric model's expected busbw (fabric_model.py) for nccl-tests' 5 warm-up and `ITERS`
timed iterations of each size, out-of-place and in-place, plus `LAUNCH_S` per mpirun: an assumption (mpirun's start
over SSH or Slurm and NCCL's communicator setup), not a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

from fmcluster.acceptance import fabric_model

MODES = ("all", "pairs")
LAUNCH_S = 30.0
WARMUP, ITERS = 5, 20  # nccl-tests' default warm-up; the script's -n
_GIB = 2**30
SIZES = {"all": [2**k for k in range(3, 35)], "pairs": [2**k * _GIB for k in range(5)]}  # 8 B..16 GiB; 1..16 GiB
TESTS = {"all": ("all_reduce", "alltoall"), "pairs": ("all_reduce",)}
_BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "alltoall": lambda n: (n - 1) / n}


def pairs(hosts: Sequence[str]) -> List[Tuple[str, str]]:
    """The pairs in the order the script runs them."""
    n = len(hosts)
    found = [(hosts[i], hosts[i + 1]) for i in range(0, n - 1, 2)]
    if n % 2:
        found.append((hosts[n - 1], hosts[0]))
    if n > 2:
        found += [(hosts[i], hosts[(i + 1) % n]) for i in range(1, n, 2)]
    return found


@dataclass(frozen=True)
class Estimate:
    mode: str
    nodes: int
    runs: int  # mpirun starts
    minutes: float

    def describe(self, group: str, group_nodes: int) -> str:
        which = f"all {self.nodes} nodes" if self.nodes >= group_nodes else f"{self.nodes} of the {group_nodes} nodes"
        how = ("each test once across them" if self.mode == "all" else
               f"all_reduce_perf on {self.runs} pairs, each node with two partners" if self.nodes > 2 else
               "all_reduce_perf on the pair")
        return (f"covers {which} of group {group} (--cover {self.mode}): {how}; about {self.minutes:.0f} min "
                f"({self.runs} mpirun start(s) at an assumed {LAUNCH_S:.0f} s each, and the transfers at the fabric "
                f"model's expected bandwidth)")


def _run_seconds(fabric: fabric_model.Fabric, collective: str, hosts: int, mode: str) -> float:
    ranks = hosts * fabric.gpus
    busbw = fabric_model.expect(fabric, collective, hosts, fabric.gpus).expected_gbs * fabric_model.GB
    factor = _BUS_FACTOR[collective](ranks)
    transfer = sum(size * factor / busbw for size in SIZES[mode])  # one iteration of every size
    return LAUNCH_S + 2 * (WARMUP + ITERS) * transfer  # out-of-place and in-place


def estimate(fabric: fabric_model.Fabric, mode: str, nodes: int) -> Estimate:
    if mode == "all":
        runs = len(TESTS["all"])
        seconds = sum(_run_seconds(fabric, c, nodes, mode) for c in TESTS["all"])
    else:
        runs = len(pairs([str(i) for i in range(nodes)]))
        seconds = runs * _run_seconds(fabric, "all_reduce", 2, mode)
    return Estimate(mode, nodes, runs, seconds / 60)

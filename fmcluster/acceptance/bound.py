"""The planner's bandwidth bound for one nccl-tests collective on a node group, as nccl-tests' busbw: shown beside
`accept`'s verdict, never the pass line (fabric_model.py is: NCCL overlaps the phases this bound adds).

Only public planner functions are used (hardware.of_group, collectives.members_per_domain / hierarchical /
all_to_all), so the bound is the one `fmcluster plan` puts into step times: the NVLink and EFA phases added
(a Collective's seconds), latency ignored. nccl-tests' busbw for n ranks is algbw x 2(n-1)/n for all-reduce and
algbw x (n-1)/n for all-to-all, all-gather and reduce-scatter (nccl-tests doc/PERFORMANCE.md), algbw = size / time,
so the bound's busbw does not depend on the message size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from fmcluster.planner import collectives as c
from fmcluster.planner import hardware
from fmcluster.planner.figures import GB

BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
              "all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n}
_KIND = {"all_reduce": c.ALL_REDUCE, "all_gather": c.ALL_GATHER, "reduce_scatter": c.REDUCE_SCATTER}
_PROBE_BYTES = float(2**30)  # any size gives the same busbw: the bound has no latency term


@dataclass(frozen=True)
class Bound:
    busbw_gbs: float
    ranks: int
    per_domain: int
    nvlink_gbs: float  # one way, per GPU
    internode_gbs: float  # per GPU
    internode_link: str
    formula: str


def plan_bound(group: Any, collective: str, ranks: int, ranks_per_host: Optional[int] = None) -> Bound:
    """`group` is a spec NodeGroup with GPUs; `ranks` the GPUs the run used and `ranks_per_host` how many ran on each
    host (from its log, or the group's). A run of 2 hosts x 4 GPUs spans two NVLink domains of 4, not one of 8."""
    hw = hardware.of_group(group, "bf16")
    if ranks_per_host:
        hosts_per_domain = max(1, hw.domain // max(hw.gpus_per_node, 1))
        per_domain = min(ranks, ranks_per_host * hosts_per_domain)
    else:
        per_domain = c.members_per_domain(ranks, 1, hw.domain, ranks)
    if collective == "alltoall":
        nvl, net = c.all_to_all(_PROBE_BYTES, ranks, per_domain, hw.nvlink_bytes_s, hw.internode_bytes_s_per_gpu)
        formula = "(n-1)/n x size / (NVLink phase + EFA phase), planner all_to_all"
    else:
        nvl, net = c.hierarchical(_KIND[collective], _PROBE_BYTES, ranks, per_domain, hw.nvlink_bytes_s,
                                  hw.internode_bytes_s_per_gpu)
        formula = f"bus factor x size / (NVLink ring of {per_domain} + inter-node ring), planner hierarchical"
    seconds = nvl + net
    busbw = BUS_FACTOR[collective](ranks) * _PROBE_BYTES / seconds / GB if seconds > 0 else 0.0
    return Bound(busbw, ranks, per_domain, hw.nvlink_bytes_s / GB, hw.internode_bytes_s_per_gpu / GB,
                 hw.internode_link, formula)

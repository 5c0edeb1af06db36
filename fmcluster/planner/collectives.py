"""Bandwidth lower bounds of the collectives a training step runs, on NVLink and on EFA.

nccl-tests PERFORMANCE.md (github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
for n ranks, a ring all-reduce moves 2(n-1)/n of the buffer through every rank's link
(busbw = algbw x 2(n-1)/n); all-gather, reduce-scatter and all-to-all move (n-1)/n.
A group that spans NVLink domains runs hierarchically: inside a domain of k members at
the per-GPU NVLink rate, across the m = n/k domains with each GPU carrying 1/k of the
buffer through its share of the node's EFA bandwidth. Latency is ignored: these are
bandwidth bounds, the time can only be longer.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Tuple

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND_RECV = "all-reduce", "all-gather", "reduce-scatter", "all-to-all", \
    "send/recv"
RING_FACTOR = {ALL_REDUCE: 2.0, ALL_GATHER: 1.0, REDUCE_SCATTER: 1.0}


def ring_seconds(kind: str, size_bytes: float, ranks: int, bytes_per_s: float) -> float:
    """One ring collective over `ranks` on links of `bytes_per_s` (size = the full buffer)."""
    if ranks <= 1 or size_bytes <= 0:
        return 0.0
    if bytes_per_s <= 0:
        return math.inf
    return RING_FACTOR[kind] * (ranks - 1) / ranks * size_bytes / bytes_per_s


@lru_cache(maxsize=4096)
def members_per_domain(ranks: int, stride: int, domain: int, gpus: int) -> int:
    """The fewest members of any one group that share an NVLink domain of `domain` GPUs, for groups of `ranks` at rank
    stride `stride` laid out in rank order over `gpus` GPUs. A group that straddles a domain boundary (16-rank groups
    on 72-GPU domains) sends the most through EFA, and the step waits for it."""
    s = max(stride, 1)
    span = ranks * s
    if ranks <= 1 or span > gpus:
        return max(1, min(ranks, domain // s))
    if s >= domain:  # consecutive members are a domain or more apart: one per domain
        return 1
    fewest = ranks
    period = span * domain // math.gcd(span, domain)  # the layout of groups over domains repeats after this
    for start in range(0, min(gpus - span + 1, period), span):
        for offset in range(s):
            counts = Counter((start + offset + i * s) // domain for i in range(ranks))
            fewest = min(fewest, min(counts.values()))
    return max(1, fewest)


def hierarchical(kind: str, size_bytes: float, ranks: int, per_domain: int, nvlink_bps: float,
                 internode_bps: float) -> Tuple[float, float]:
    """(NVLink seconds, inter-node seconds) of a two-level ring collective."""
    k = max(1, min(ranks, per_domain))
    m = math.ceil(ranks / k)
    return ring_seconds(kind, size_bytes, k, nvlink_bps), ring_seconds(kind, size_bytes / k, m, internode_bps)


def all_to_all(size_bytes: float, ranks: int, per_domain: int, nvlink_bps: float,
               internode_bps: float) -> Tuple[float, float]:
    """(NVLink seconds, inter-node seconds) of one all-to-all where each rank holds `size_bytes`.

    Each rank sends (n-1)/n of its buffer: (k-1)/n to peers in its NVLink domain, (n-k)/n
    to the rest, which must leave through the GPU's share of EFA. The two run at once.
    """
    if ranks <= 1 or size_bytes <= 0:
        return 0.0, 0.0
    k = max(1, min(ranks, per_domain))
    inside = size_bytes * (k - 1) / ranks
    outside = size_bytes * (ranks - k) / ranks
    nvl = inside / nvlink_bps if inside else 0.0
    net = (outside / internode_bps if internode_bps > 0 else math.inf) if outside else 0.0
    return nvl, net


@dataclass(frozen=True)
class Collective:
    """One kind of communication in a step, summed over the step."""

    name: str
    kind: str
    group: str  # the parallel group it runs in: dp, dp-expert, tp, pp, ep
    ranks: int
    bytes_per_call: float
    calls: float
    nvlink_s: float
    internode_s: float
    formula: str
    internode_link: str = "EFA"

    @property
    def seconds(self) -> float:
        return self.nvlink_s + self.internode_s

    @property
    def link(self) -> str:
        parts = [name for name, s in (("NVLink", self.nvlink_s), (self.internode_link, self.internode_s)) if s > 0]
        return "+".join(parts) or "-"

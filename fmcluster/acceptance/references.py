"""Published nccl-tests bus bandwidth per instance type, collective and node count (GB/s, 8 GPUs per node).

Each value is the lower of the out-of-place and in-place busbw the source printed (what `accept` measures too).
Sources (docs/observability.md, "Fabric acceptance", says more about each):

- AWS_SAMPLE: aws-samples/awsome-distributed-training, micro-benchmarks/nccl-tests/README.md, "Results": the
  all_reduce_perf output of 2 x p5.48xlarge, 8 B to 16 GiB.
- HYPERPOD_P5: crazyguitar/aws-gpu-communication-benchmark, data/nccl_all_reduce.csv and data/nccl_alltoall.csv:
  nccl-tests on SageMaker HyperPod p5.48xlarge, 2 to 32 nodes, 32 MiB to 8 GiB (2 GiB for alltoall), 1000
  iterations; sizes in the CSV are MiB (the job's `-b 32M`).

No public p5e, p5en or p6 nccl-tests result was found: for those types `accept` compares with the plan only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

MIB = 2**20
AWS_SAMPLE = "https://github.com/aws-samples/awsome-distributed-training/tree/main/micro-benchmarks/nccl-tests"
HYPERPOD_P5 = "https://github.com/crazyguitar/aws-gpu-communication-benchmark/tree/main/data"


@dataclass(frozen=True)
class Reference:
    source: str
    points: Tuple[Tuple[int, float], ...]  # (bytes, busbw GB/s), ascending


def _mib(source: str, *pairs: Tuple[int, float]) -> Reference:
    return Reference(source, tuple((m * MIB, bw) for m, bw in pairs))


_MIB_SIZES = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def _series(source: str, values: Tuple[float, ...]) -> Reference:
    return _mib(source, *zip(_MIB_SIZES, values))


# (instance type, collective, nodes) -> reference
PUBLISHED: Dict[Tuple[str, str, int], Reference] = {
    ("p5.48xlarge", "all_reduce", 2): Reference(AWS_SAMPLE, (
        (1 * MIB, 15.95), (2 * MIB, 26.70), (4 * MIB, 46.64), (8 * MIB, 76.80), (16 * MIB, 105.45),
        (32 * MIB, 143.09), (64 * MIB, 208.26), (128 * MIB, 287.01), (256 * MIB, 342.81), (512 * MIB, 393.34),
        (1024 * MIB, 436.95), (2048 * MIB, 442.06), (4096 * MIB, 464.33), (8192 * MIB, 478.95),
        (16384 * MIB, 487.09))),
    ("p5.48xlarge", "all_reduce", 4): _series(HYPERPOD_P5, (95.38, 152.41, 229.48, 273.34, 278.41, 280.27, 347.56,
                                                             354.24, 356.99)),
    ("p5.48xlarge", "all_reduce", 8): _series(HYPERPOD_P5, (86.74, 102.49, 154.33, 232.09, 271.56, 273.66, 278.15,
                                                             351.32, 353.65)),
    ("p5.48xlarge", "all_reduce", 16): _series(HYPERPOD_P5, (74.85, 92.39, 128.73, 148.11, 223.80, 267.99, 270.91,
                                                              306.15, 353.92)),
    ("p5.48xlarge", "all_reduce", 32): _series(HYPERPOD_P5, (65.95, 82.86, 115.78, 137.99, 156.83, 220.08, 269.47,
                                                              299.83, 321.10)),
    ("p5.48xlarge", "alltoall", 2): _series(HYPERPOD_P5, (44.79, 62.08, 68.79, 74.05, 75.79, 77.73, 79.25)),
    ("p5.48xlarge", "alltoall", 4): _series(HYPERPOD_P5, (34.45, 43.03, 52.20, 54.13, 53.64, 53.61, 54.00)),
    ("p5.48xlarge", "alltoall", 8): _series(HYPERPOD_P5, (28.67, 34.69, 36.20, 44.40, 46.25, 48.31, 49.63)),
    ("p5.48xlarge", "alltoall", 16): _series(HYPERPOD_P5, (24.63, 26.08, 31.45, 34.72, 40.07, 42.36, 44.22)),
    ("p5.48xlarge", "alltoall", 32): _series(HYPERPOD_P5, (19.72, 22.92, 26.37, 30.21, 32.84, 38.68, 40.78)),
}


def reference(instance_type: str, collective: str, nodes: int) -> Optional[Reference]:
    """The published series for exactly this node count (bandwidth falls with nodes: no other count stands in)."""
    return PUBLISHED.get((instance_type.removeprefix("ml."), collective, nodes))


def at(ref: Reference, size: int) -> Optional[float]:
    """The published busbw at `size`, interpolated linearly in log2(size) between its two neighbours; None outside
    the published range."""
    points = ref.points
    if not points or size < points[0][0] or size > points[-1][0]:
        return None
    for (s0, b0), (s1, b1) in zip(points, points[1:]):
        if s0 <= size <= s1:
            if size == s0:
                return b0
            t = (math.log2(size) - math.log2(s0)) / (math.log2(s1) - math.log2(s0))
            return b0 + t * (b1 - b0)
    return points[-1][1]

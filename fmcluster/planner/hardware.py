"""The hardware one node group gives a training job, in the units the formulas use (bytes, FLOP/s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

from fmcluster.planner.errors import PlanUsageError
from fmcluster.planner.figures import GB, GIB

# Memory the job cannot use: CUDA context, NCCL buffers, allocator fragmentation. ZeRO
# (arXiv:1910.02054 §3.2) calls these residual states; 10% is our stated allowance.
HBM_USABLE_FRACTION = 0.90
PRECISIONS = ("bf16", "fp8")  # the catalog's dense peaks; it lists no FP4 peak for any type


@dataclass(frozen=True)
class Hardware:
    group: str
    instance_type: str
    nodes: int
    gpus_per_node: int
    gpu: str
    domain: int  # GPUs in one NVLink domain (8 on P5/P6, 72 on a p6e-gb200 UltraServer)
    hbm_bytes: float  # per GPU
    peak_flops: float  # dense, per GPU, at the chosen precision
    nvlink_bytes_s: float  # one direction, per GPU
    internode_bytes_s_per_gpu: float  # the node's EFA (or, without EFA, its ENA interface) shared by its GPUs
    internode_link: str  # EFA or ENA
    unverified: List[str]
    precision: str = "bf16"  # the compute precision peak_flops is for
    bf16_peak_flops: float = 0.0  # what attention runs at whatever the precision (FP8 speeds up the GEMMs only)
    arch: str = ""  # GPU generation (hopper, blackwell): what the calibrated rates were measured on

    @property
    def attention_peak_flops(self) -> float:
        return self.bf16_peak_flops or self.peak_flops

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def usable_hbm_bytes(self) -> float:
        return self.hbm_bytes * HBM_USABLE_FRACTION

    def summary(self) -> Dict[str, Any]:
        return {"group": self.group, "instance_type": self.instance_type, "nodes": self.nodes, "gpus": self.gpus,
                "gpu": self.gpu, "nvlink_domain_gpus": self.domain, "hbm_gib_per_gpu": round(self.hbm_bytes / GIB, 1),
                "usable_hbm_fraction": HBM_USABLE_FRACTION, "peak_tflops_per_gpu": self.peak_flops / 1e12,
                "nvlink_gb_s_one_way_per_gpu": self.nvlink_bytes_s / GB, "internode_link": self.internode_link,
                "internode_gb_s_per_gpu": self.internode_bytes_s_per_gpu / GB,
                "attention_peak_tflops_per_gpu": self.attention_peak_flops / 1e12, "generation": self.arch,
                "unverified": self.unverified}


def check_precision(precision: str, instance_type: str, gpu: str) -> None:
    """--precision names a dense peak the catalog lists for the type: bf16 or fp8 (no type has an FP4 figure)."""
    if precision not in PRECISIONS:
        raise PlanUsageError(f"--precision: {precision!r}: the catalog lists no {precision.upper()} dense peak for "
                             f"{instance_type} ({gpu}); give {' or '.join(PRECISIONS)}")


def of_group(g: Any, precision: str) -> Hardware:
    """`g` is a spec NodeGroup with a GPU instance type."""
    return of_type(g.instance, g.name, g.instance_type, g.count, precision, bool(g.efa_enabled))


def of_type(t: Any, group: str, instance_type: str, count: int, precision: str, efa: bool) -> Hardware:
    """`t` is the catalog's InstanceType: `count` of them as one group (a spec's node group, or a published run)."""
    check_precision(precision, instance_type, t.gpu or "no GPU")
    tflops = t.fp8_dense_tflops if precision == "fp8" else t.bf16_dense_tflops
    peak_fact = "fp8_dense_tflops" if precision == "fp8" else "bf16_dense_tflops"
    facts = ("gpu_memory_mib", peak_fact, "nvlink_gbs_per_gpu", "efa_gbps", "nvlink_domain_gpus")
    return Hardware(
        group=group, instance_type=instance_type, nodes=count, gpus_per_node=t.gpus, gpu=t.gpu or "none",
        domain=max(t.nvlink_domain_gpus, t.gpus, 1),
        hbm_bytes=t.gpu_memory_mib * 2**20,
        peak_flops=tflops * 1e12,
        # Catalog NVLink figures are bidirectional; a ring sends and receives at the one-way rate.
        nvlink_bytes_s=t.nvlink_gbs_per_gpu / 2 * GB,
        # Without EFA the launch template gives a node one ENA interface, on network card 0.
        internode_bytes_s_per_gpu=(t.efa_gbps if efa else t.card_gbps) / 8 * GB / max(t.gpus, 1),
        internode_link="EFA" if efa else "ENA",
        unverified=[f for f in facts if not t.is_verified(f)],
        precision=precision,
        bf16_peak_flops=t.bf16_dense_tflops * 1e12,
        arch=t.gpu_arch or "",
    )

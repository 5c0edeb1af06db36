"""An estimate of one step beside its lower bound: what each layout really pays.

The bound (steptime.Step.bound_s) assumes every collective hides behind compute. The estimate
charges, per layout, on top of the calibrated compute (rates.py: GEMMs, attention, narrow GEMMs, short attention
blocks):

- the pipeline bubble (pp - 1) / (v x micro-batches) of that compute;
- exposed communication, each collective after the overlap its framework runs:
  data parallel (gradients bucketed per layer, Megatron Bridge communication-overlap guide: one
  chunk stays exposed; a gradient reduction hides behind the last micro-batch's backward, the
  weight all-gather behind the first one's forward, per-pass gathers behind all compute);
  tensor parallel (Megatron and FSDP2 overlap part of it with the GEMMs: TP_EXPOSED of it shows;
  DeepSpeed none); pipeline send/recv (the fill and drain path, 2 (pp - 1) transfers); context
  parallel (ring attention, Liu et al. arXiv:2310.01889: each of the cp - 1 transfers of a pass overlaps one block
  of attention, what exceeds the block shows, and the last gradient transfer of each layer's backward has nothing
  left to hide behind); expert all-to-all (Megatron Core's combined 1F1B hides it behind the neighbouring
  micro-batch's compute when pp = 1 or v > 1; otherwise exposed; no framework is credited with it: see EP_OVERLAP).

estimate = max(bound, compute + bubble + exposed communication), and the estimate's MFU = model FLOPs
(no recomputation) x tokens / (GPUs x peak x estimate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from fmcluster.planner import collectives as c
from fmcluster.planner.frameworks import GATHER_FOR_COMPUTE, SCATTER_EVERY_MICROBATCH, Sharding
from fmcluster.planner.hardware import Hardware
from fmcluster.planner.layouts import Layout, stage_params
from fmcluster.planner.models import Model
from fmcluster.planner.rates import width_efficiency
from fmcluster.planner.steptime import Step, flops_per_token

TP_EXPOSED = {"megatron": 0.25, "fsdp": 0.5, "deepspeed": 1.0}  # share of tensor-parallel traffic left exposed
# Frameworks whose all-to-all hides behind another micro-batch. None here: DeepSeek-V3's published rate, reached with
# DualPipe's overlap, matches the estimate only with the all-to-all charged in full (its dispatch and combine kernels
# hold 20 of the H800's 132 SMs, arXiv:2412.19437 §3.2.2): overlap does not come free of compute.
EP_OVERLAP: frozenset = frozenset()

ASSUMPTIONS = [
    f"Estimate: tensor-parallel traffic is exposed at {TP_EXPOSED['megatron']:.0%} with Megatron (TE comm-GEMM "
    f"overlap), {TP_EXPOSED['fsdp']:.0%} with FSDP2 (async TP), {TP_EXPOSED['deepspeed']:.0%} with DeepSpeed; "
    "data-parallel traffic shows one per-layer chunk or what exceeds its overlap window; pipeline transfers on the "
    "fill and drain path are exposed; each context-parallel ring transfer overlaps one block of attention and the "
    "last gradient transfer of each layer shows; the expert all-to-all is exposed in full (overlapping it takes SMs "
    "from compute; DeepSeek-V3's published rate matches it so). These shares are assumptions; the compute "
    "rates they add to are calibrated (docs/planning.md, Calibration).",
]


@dataclass(frozen=True)
class Estimate:
    compute_s: float  # at the calibrated rates (or --mfu), narrow GEMMs and short attention blocks included
    gemm_efficiency: float
    bubble_s: float
    exposed: Dict[str, float]  # per parallel group
    seconds: float
    mfu: float
    tflops: float = 0.0  # model TFLOP/s per GPU (no recomputation), as NVIDIA's and Meta's tables state throughput

    def summary(self) -> Dict[str, Any]:
        return {"compute_s": self.compute_s, "gemm_efficiency": self.gemm_efficiency, "bubble_s": self.bubble_s,
                "exposed_s": dict(self.exposed), "seconds": self.seconds, "mfu": self.mfu,
                "model_tflops_per_gpu": self.tflops}


def gemm_efficiency(model: Model, layout: Layout) -> float:
    return width_efficiency(model, layout)


def ring_exposed(model: Model, layout: Layout, st: Step, x: c.Collective) -> float:
    """Ring attention's transfers against the attention block each one overlaps (see the module doc)."""
    cp = layout.cp
    per_layer = max(1.0, stage_params(model, layout)["layers"]) * layout.microbatches  # layer x micro-batch visits
    one = x.seconds / max(x.calls, 1.0)
    attention = st.rates.attention_s if st.rates else 0.0
    block_fwd = attention / per_layer / 3 / cp  # forward is a third of attention's FLOPs, split into cp blocks
    block_bwd = 2 * block_fwd
    passes = x.calls / per_layer / (cp - 1) - 2  # forward passes (2 with full recomputation)
    forward = passes * (cp - 1) * max(0.0, one - block_fwd)
    backward = (cp - 1) * max(0.0, 2 * one - block_bwd) + one  # keys/values and their gradients; the last gradient
    return per_layer * (forward + backward)


def estimate(model: Model, hw: Hardware, layout: Layout, sharding: Sharding, framework_key: str, st: Step) -> Estimate:
    compute = st.compute_s
    m = layout.microbatches
    bubble = compute * (layout.pp - 1) / (layout.vp * m)
    chunks = max(1.0, stage_params(model, layout)["layers"])
    exposed: Dict[str, float] = {}

    def charge(group: str, seconds: float) -> None:
        exposed[group] = exposed.get(group, 0.0) + max(0.0, seconds)

    for x in st.collectives:
        t = x.seconds
        if x.group in ("dp", "dp-expert"):
            if sharding.pattern == GATHER_FOR_COMPUTE or (sharding.pattern == SCATTER_EVERY_MICROBATCH and m > 1
                                                          and x.calls > 1):
                window = compute
            elif x.kind == c.ALL_GATHER:
                window = compute / m / 3  # the next step's first forward
            else:
                window = compute / m * 2 / 3  # the last micro-batch's backward
            charge(x.group, max(t / (chunks * max(x.calls, 1.0)), t - window))
        elif x.group == "tp":
            charge("tp", t * TP_EXPOSED.get(framework_key, 1.0))
        elif x.group == "pp":
            one = t / max(x.calls, 1.0)
            charge("pp", 2 * (layout.pp - 1) * one + max(0.0, t - compute))
        elif x.group == "cp":
            charge("cp", ring_exposed(model, layout, st, x))
        elif x.group == "ep":
            hidden = framework_key in EP_OVERLAP and (layout.pp == 1 or layout.vp > 1)
            charge("ep", t - compute if hidden else t)
    seconds = max(st.bound_s, compute + bubble + sum(exposed.values()))
    model_flops = flops_per_token(model, "none") * st.tokens
    mfu = model_flops / (hw.gpus * hw.peak_flops * seconds) if seconds > 0 else 0.0
    tflops = model_flops / (hw.gpus * seconds) / 1e12 if seconds > 0 else 0.0
    width = st.rates.width_efficiency if st.rates else gemm_efficiency(model, layout)
    return Estimate(compute, width, bubble, exposed, seconds, mfu, tflops)

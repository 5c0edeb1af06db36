"""An estimate of one step beside its lower bound: what each layout really pays.

The bound (steptime.Step.bound_s) assumes every collective hides behind compute. The estimate
charges, per layout:

- narrow matrix multiplies: a GEMM whose narrowest per-GPU side w (attention heads x head size / tp,
  FFN / tp, expert FFN / etp) is under 1,024 wastes part of its last tile (NVIDIA Matrix
  Multiplication Background guide: tile and wave quantization): efficiency w/(w + 64), taken
  relative to w = 1,024, where --mfu is assumed to hold;
- the pipeline bubble (pp - 1) / (v x micro-batches) of that compute;
- exposed communication, each collective after the overlap its framework runs:
  data parallel (gradients bucketed per layer, Megatron Bridge communication-overlap guide: one
  chunk stays exposed; a gradient reduction hides behind the last micro-batch's backward, the
  weight all-gather behind the first one's forward, per-pass gathers behind all compute);
  tensor parallel (Megatron and FSDP2 overlap part of it with the GEMMs: TP_EXPOSED of it shows;
  DeepSpeed none); pipeline send/recv (the fill and drain path, 2 (pp - 1) transfers); context
  parallel (behind attention compute); expert all-to-all (Megatron Core's combined 1F1B hides it
  behind the neighbouring micro-batch's compute when pp = 1 or v > 1; otherwise exposed).

estimate = max(bound, compute / GEMM efficiency + bubble + exposed communication), and the
estimate's MFU = model FLOPs (no recomputation) x tokens / (GPUs x peak x estimate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from fmcluster.planner import collectives as c
from fmcluster.planner.frameworks import GATHER_FOR_COMPUTE, SCATTER_EVERY_MICROBATCH, Sharding
from fmcluster.planner.hardware import Hardware
from fmcluster.planner.layouts import Layout, stage_params
from fmcluster.planner.models import Model
from fmcluster.planner.steptime import Step, attention_share, flops_per_token

TILE_LOSS = 64  # half a 128-wide tile lost on average to tile quantization
FULL_WIDTH = 1024  # GEMMs at least this narrow side run at the --mfu rate
TP_EXPOSED = {"megatron": 0.25, "fsdp": 0.5, "deepspeed": 1.0}  # share of tensor-parallel traffic left exposed
EP_OVERLAP = {"megatron"}  # frameworks that hide the expert all-to-all behind another micro-batch (combined 1F1B)

ASSUMPTIONS = [
    f"Estimate: GEMMs narrower than {FULL_WIDTH} per GPU lose w/(w+{TILE_LOSS}) to tile quantization (relative to "
    f"{FULL_WIDTH}); tensor-parallel traffic is exposed at {TP_EXPOSED['megatron']:.0%} with Megatron "
    f"(TE comm-GEMM overlap), {TP_EXPOSED['fsdp']:.0%} with FSDP2 (async TP), {TP_EXPOSED['deepspeed']:.0%} with "
    "DeepSpeed; data-parallel traffic shows one per-layer chunk or what exceeds its overlap window; pipeline "
    "transfers on the fill and drain path are exposed; context-parallel traffic hides behind attention compute; the "
    "expert all-to-all hides behind the neighbouring micro-batch with Megatron (combined 1F1B, pp = 1 or v > 1), "
    "otherwise it is exposed. These shares are assumptions, not measurements.",
]


@dataclass(frozen=True)
class Estimate:
    compute_s: float  # at the GEMM efficiency
    gemm_efficiency: float
    bubble_s: float
    exposed: Dict[str, float]  # per parallel group
    seconds: float
    mfu: float

    def summary(self) -> Dict[str, Any]:
        return {"compute_s": self.compute_s, "gemm_efficiency": self.gemm_efficiency, "bubble_s": self.bubble_s,
                "exposed_s": dict(self.exposed), "seconds": self.seconds, "mfu": self.mfu}


def gemm_efficiency(model: Model, layout: Layout) -> float:
    widths = [model.heads * model.head_dim / layout.tp]
    if model.ffn and (not model.is_moe or model.dense_layers):
        widths.append(model.ffn / layout.tp)
    if model.is_moe and model.expert_ffn:
        widths.append(model.expert_ffn / layout.expert_tp)
    w = min(widths)
    return min(1.0, (w / (w + TILE_LOSS)) / (FULL_WIDTH / (FULL_WIDTH + TILE_LOSS)))


def estimate(model: Model, hw: Hardware, layout: Layout, sharding: Sharding, framework_key: str, st: Step) -> Estimate:
    eff = gemm_efficiency(model, layout)
    compute = st.compute_s / eff
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
            charge("cp", t - compute * attention_share(model))
        elif x.group == "ep":
            hidden = framework_key in EP_OVERLAP and (layout.pp == 1 or layout.vp > 1)
            charge("ep", t - compute if hidden else t)
    seconds = max(st.bound_s, compute + bubble + sum(exposed.values()))
    model_flops = flops_per_token(model, "none") * st.tokens
    mfu = model_flops / (hw.gpus * hw.peak_flops * seconds) if seconds > 0 else 0.0
    return Estimate(compute, eff, bubble, exposed, seconds, mfu)

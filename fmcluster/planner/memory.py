"""Memory per GPU: weights, gradients, optimizer state and activations against HBM.

Mixed-precision Adam keeps 2 bytes of weights, 2 of gradients and K = 12 of optimizer
state (fp32 master weights, momentum, variance) per parameter: 16 bytes, ZeRO
(Rajbhandari et al., arXiv:1910.02054 §3.1: 7.5B parameters -> 120 GB). ZeRO stage 1
shards the optimizer state over the data-parallel ranks, stage 2 also the gradients,
stage 3 (= PyTorch FSDP full sharding) also the weights (§5). FP8 training (NVIDIA
Transformer Engine) keeps these BF16/FP32 copies, so the planner counts the same bytes
for fp8; FP8 changes the compute peak only.

Activations per layer and micro-batch of b sequences of s tokens, hidden h, a heads,
tensor parallelism t with sequence parallelism (Korthikanti et al., arXiv:2205.05198
Table 2): none sbh(34/t + 5as/(ht)); selective recomputation sbh 34/t (what
FlashAttention, Dao et al. arXiv:2205.14135, keeps too: never the s x s scores); full
recomputation 2sbh, the layer input, which sequence parallelism splits along the
sequence: 2sbh/t (Table 2 lists the unsplit 2sbh); plus one layer's working set while it
is recomputed. With the 1F1B
pipeline schedule the first stage holds activations of min(pp, microbatches) micro-batches
of its L/pp layers (§4.2.3). The loss holds 4sbv/t bytes of fp32 logits (§4.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from fmcluster.planner.layouts import Layout, stage_params
from fmcluster.planner.models import Model

WEIGHT_BYTES, GRAD_BYTES, OPTIMIZER_BYTES = 2, 2, 12
SHARDINGS = ("ddp", "zero1", "zero2", "zero3")  # zero3 = FSDP full shard
RECOMPUTE = ("none", "selective", "full")
SHARDING_LABEL = {"ddp": "replicated (DDP)", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3/FSDP"}
TERMS = ("weights", "gradients", "optimizer", "activations")


@dataclass(frozen=True)
class Memory:
    sharding: str
    recompute: str
    weights: float
    gradients: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations

    def terms(self) -> Dict[str, float]:
        return {t: getattr(self, t) for t in TERMS}


def activation_coefficient(model: Model, tp: int, recompute: str) -> float:
    """Bytes per layer per s*b*h (Korthikanti Table 2, sequence parallelism with tp > 1)."""
    s, h, a = model.seq, model.hidden, model.heads
    if recompute == "none":
        return 34 / tp + 5 * a * s / (h * tp)
    if recompute == "selective":
        return 34 / tp
    return 2 / tp


def activations(model: Model, layout: Layout, recompute: str) -> float:
    sbh = float(layout.micro_batch * model.seq * model.hidden)
    layers = stage_params(model, layout)["layers"]
    in_flight = min(layout.pp, layout.microbatches)
    total = sbh * activation_coefficient(model, layout.tp, recompute) * layers * in_flight
    if recompute == "full":
        total += sbh * 34 / layout.tp  # the layer being recomputed
    logits = 4.0 * layout.micro_batch * model.seq * model.vocab / layout.tp
    return total + logits


def memory(model: Model, layout: Layout, sharding: str, recompute: str) -> Memory:
    p = stage_params(model, layout)
    level = SHARDINGS.index(sharding)

    def per_gpu(bytes_per_param: int, from_level: int) -> float:
        dense = p["dense"] / (layout.dp if level >= from_level else 1)
        expert = p["expert"] / (layout.expert_dp if level >= from_level else 1)
        return bytes_per_param * (dense + expert)

    return Memory(sharding, recompute, weights=per_gpu(WEIGHT_BYTES, 3), gradients=per_gpu(GRAD_BYTES, 2),
                  optimizer=per_gpu(OPTIMIZER_BYTES, 1), activations=activations(model, layout, recompute))

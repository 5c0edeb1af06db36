"""Memory per GPU: weights, gradients, optimizer state and activations against HBM.

Bytes per parameter and what is sharded over the data-parallel ranks are the framework's
(frameworks.py: Megatron-LM 18 or 6 + 12/d, FSDP2 16/d, ZeRO 16 / 4 + 12/d / 2 + 14/d / 16/d).
A framework that gathers sharded weights for compute holds two layers of them unsharded in
bf16 (the one computing and the one prefetched). FP8 training (NVIDIA Transformer Engine)
keeps these BF16/FP32 copies, so the planner counts the same bytes for fp8; FP8 changes the
compute peak only.

Activations per layer and micro-batch of b sequences of s tokens, hidden h, a heads,
tensor parallelism t with sequence parallelism (Korthikanti et al., arXiv:2205.05198
Table 2): none sbh(34/t + 5as/(ht)); selective recomputation sbh 34/t (what
FlashAttention, Dao et al. arXiv:2205.14135, keeps too: never the s x s scores); full
recomputation 2sbh, the layer input, which sequence parallelism splits along the
sequence: 2sbh/t (Table 2 lists the unsplit 2sbh); plus one layer's working set while it
is recomputed. Context parallelism divides all of it by cp. With the 1F1B pipeline schedule
the first stage holds activations of min(pp, microbatches) micro-batches of its L/pp layers,
interleaving with v virtual stages 1 + (pp-1)/(pp v) times that (§4.2.3). The loss holds
4sbv/t bytes of fp32 logits (§4.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from fmcluster.planner.frameworks import Sharding
from fmcluster.planner.layouts import Layout, stage_params
from fmcluster.planner.models import Model

RECOMPUTE = ("none", "selective", "full")
GATHERED_LAYERS = 2  # sharded weights gathered for compute: the layer running and the one prefetched
TERMS = ("weights", "gradients", "optimizer", "activations", "gathered")


@dataclass(frozen=True)
class Memory:
    scheme: Sharding
    recompute: str
    weights: float
    gradients: float
    optimizer: float
    activations: float
    gathered: float = 0.0  # sharded weights gathered for compute (FSDP, ZeRO-3)

    @property
    def sharding(self) -> str:
        return self.scheme.key

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.gathered

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


def in_flight(layout: Layout) -> float:
    """Micro-batches of the stage's layers the first stage holds: min(pp, m) with 1F1B, times 1 + (pp-1)/(pp v) with
    v interleaved virtual stages (Korthikanti et al. §4.2.3)."""
    base = float(min(layout.pp, layout.microbatches))
    return base * (1 + (layout.pp - 1) / (layout.pp * layout.vp)) if layout.vp > 1 else base


def activations(model: Model, layout: Layout, recompute: str) -> float:
    """Context parallelism splits every sequence-sized activation (and the attention scores' rows) over cp."""
    sbh = float(layout.micro_batch * model.seq * model.hidden) / layout.cp
    layers = stage_params(model, layout)["layers"]
    total = sbh * activation_coefficient(model, layout.tp, recompute) * layers * in_flight(layout)
    if recompute == "full":
        total += sbh * 34 / layout.tp  # the layer being recomputed
    logits = 4.0 * layout.micro_batch * model.seq * model.vocab / (layout.tp * layout.cp)
    return total + logits


def memory(model: Model, layout: Layout, sharding: Sharding, recompute: str) -> Memory:
    p = stage_params(model, layout)

    def per_gpu(bytes_per_param: int, sharded: bool) -> float:
        dense = p["dense"] / (layout.dense_dp if sharded else 1)
        expert = p["expert"] / (layout.expert_dp if sharded else 1)
        return bytes_per_param * (dense + expert)

    gathered = gathered_weights(p) if sharding.shard_weights and layout.dense_dp > 1 else 0.0
    return Memory(sharding, recompute, weights=per_gpu(sharding.weight_bytes, sharding.shard_weights),
                  gradients=per_gpu(sharding.grad_bytes, sharding.shard_grads),
                  optimizer=per_gpu(sharding.optimizer_bytes, sharding.shard_optimizer),
                  activations=activations(model, layout, recompute), gathered=gathered)


def gathered_weights(p: dict) -> float:
    """bf16 copies of the layers gathered for compute when weights are sharded."""
    layers = max(p["layers"], 1.0)
    return 2.0 * (p["dense"] + p["expert"]) / layers * min(float(GATHERED_LAYERS), layers)

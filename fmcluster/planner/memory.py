"""Memory per GPU: weights, gradients, optimizer state and activations against HBM.

Bytes per parameter and what is sharded over the data-parallel ranks are the framework's
(frameworks.py: Megatron-LM 18 or 6 + 12/d, FSDP2 16/d, ZeRO 16 / 4 + 12/d / 2 + 14/d / 16/d).
A framework that gathers sharded weights for compute holds two layers of them unsharded in
bf16 (the one computing and the one prefetched). FP8 training (NVIDIA Transformer Engine)
keeps these BF16/FP32 copies, so the planner counts the same bytes for fp8.

Activations are counted tensor by tensor, what each layer keeps for its backward pass (Korthikanti et al.,
arXiv:2205.05198 §4.1, whose GPT-3 layer this reproduces: 34 bytes per token and hidden unit with its dropout
masks), with FlashAttention (Dao et al., arXiv:2205.14135), which never keeps the s x s scores: two norm inputs
and two norm outputs (2h bytes each), the attention's queries, keys, values and output (2 bytes per element of
each, grouped-query and latent attention by their widths), 1-byte dropout masks where the model has dropout, and
the MLP's activation input and output (a gated MLP keeps both halves of its first projection: 6 x ffn bytes, a
plain one 4 x ffn), with a mixture of experts every routed copy of a token (2h) and its expert's MLP. Selective
recomputation recomputes the norms and the activation function from the tensors kept (less the norm outputs and
the activation output); full recomputation keeps each layer's input (2h) plus one layer's working set. Sequence
parallelism (tp > 1) splits all of it over tp, context parallelism over cp.

The first pipeline stage holds the most: Megatron Core's schedules (pipeline_parallel/schedules.py,
get_pp_rank_microbatches) run pp - 1 warm-up forwards with 1F1B and 2 (pp - 1) + (v - 1) pp with v interleaved
model chunks, never more than the m x v there are, plus the one in steady state; each chunk holds 1/v of the
stage's layers. That is Korthikanti's L (1 + (pp - 1)/(pp v)) (§4.2.3) once m is large enough and exactly L when
m = pp. The loss holds 4 s b v / t bytes of fp32 logits (§4.3).
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
ACT = 2  # bf16 bytes per activation element


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


def ffn_width(model: Model) -> float:
    """The MLP's hidden width; without one given, the width whose MLP has GPT's 8 h^2 weights (4h plain, 8h/3 gated),
    which keeps 16h bytes of activations either way."""
    if model.ffn:
        return float(model.ffn)
    return 4.0 * model.hidden if model.mlp == "plain" else 8.0 * model.hidden / 3


def _mlp_kept(width: float, gated: bool) -> Dict[str, float]:
    """Bytes per token an MLP keeps: its activation function's input and output."""
    return {"input": ACT * width * (2 if gated else 1), "output": ACT * width}


def layer_bytes_per_token(model: Model, recompute: str) -> float:
    """Activation bytes one layer keeps per token, before tensor and context parallelism split them."""
    h = model.hidden
    dqk, dv = model.qk_head_dim or model.head_dim, model.v_head_dim or model.head_dim
    attention = ACT * (model.heads * (dqk + dv) + model.kv_heads * (dqk + dv))  # q, k, v, and the output
    gated = model.mlp == "gated"
    dense = _mlp_kept(ffn_width(model), gated)
    if model.is_moe:
        ef = float(model.expert_ffn or ffn_width(model))
        k, shared = model.active_experts, model.shared_experts
        expert = _mlp_kept(ef, gated)
        moe = {"input": k * (ACT * h + expert["input"]) + shared * expert["input"],
               "output": (k + shared) * expert["output"]}
        share = model.moe_layers / model.layers
        mlp = {key: share * moe[key] + (1 - share) * dense[key] for key in dense}
    else:
        mlp = dense
    norm_inputs, norm_outputs = 2 * ACT * h, 2 * ACT * h
    masks = 2.0 * h if model.dropout else 0.0
    kept = norm_inputs + norm_outputs + attention + masks + mlp["input"] + mlp["output"]
    if recompute == "none":
        return kept
    if recompute == "selective":
        return kept - norm_outputs - mlp["output"]
    return float(ACT * h)  # full: the layer's input


def activation_coefficient(model: Model, tp: int, recompute: str) -> float:
    """Bytes per layer per s*b*h, sequence parallelism splitting them over tp (Korthikanti's Table 2 unit)."""
    return layer_bytes_per_token(model, recompute) / model.hidden / tp


def in_flight(layout: Layout) -> float:
    """Micro-batches of the stage's layers the first stage holds (Megatron Core's warm-up count, see above)."""
    pp, m, v = layout.pp, layout.microbatches, layout.vp
    if pp == 1:
        return 1.0
    if v == 1:
        return float(min(pp, m))
    chunks = min(m * v, 2 * (pp - 1) + (v - 1) * pp + 1)
    return chunks / v


def activations(model: Model, layout: Layout, recompute: str) -> float:
    tokens = float(layout.micro_batch * model.seq) / (layout.cp * layout.tp)  # per GPU and micro-batch
    layers = stage_params(model, layout)["layers"]
    total = tokens * layer_bytes_per_token(model, recompute) * layers * in_flight(layout)
    if recompute == "full":
        total += tokens * layer_bytes_per_token(model, "none")  # the layer being recomputed
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

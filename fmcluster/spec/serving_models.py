"""Model architectures the `serving` section and `fmcluster plan --serve` size replicas for: what the weights weigh,
what one token of KV cache weighs, the FLOPs per token (docs/serving.md, "Sizing").

Each entry is the model's Hugging Face ``config.json`` (the source named beside it); ``params`` and ``active_params``
as its model card states them. ``kv_latent``: multi-head latent attention's cached width per layer (kv_lora_rank +
qk_rope_head_dim), held whole on every tensor-parallel rank; without it a layer caches K and V, 2 x kv_heads x
head_dim values, split over min(tp, kv_heads) ranks. ``context``: max_position_embeddings. Data, loaded on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Dict, List, Tuple

ALIASES = {
    "llama3-8b": "llama3.1-8b",
    "llama3-70b": "llama3.1-70b",
    "llama3.3-70b": "llama3.1-70b",
    "llama3-405b": "llama3.1-405b",
    "deepseek-r1": "deepseek-v3",
}

_HF = "https://huggingface.co"
MODELS: Dict[str, Dict[str, Any]] = {
    "llama3.1-8b": dict(
        params=8030261248, layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256,
        context=131072, sources=(f"{_HF}/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json",)),
    "llama3.1-70b": dict(
        params=70553706496, layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672, vocab=128256,
        context=131072, sources=(f"{_HF}/meta-llama/Llama-3.1-70B-Instruct/blob/main/config.json",
                                 f"{_HF}/meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json")),
    "llama3.1-405b": dict(
        params=405853388800, layers=126, hidden=16384, heads=128, kv_heads=8, head_dim=128, ffn=53248, vocab=128256,
        context=131072, sources=(f"{_HF}/meta-llama/Llama-3.1-405B-Instruct/blob/main/config.json",)),
    "mixtral-8x7b": dict(
        params=46702792704, active_params=12879925248, layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128,
        ffn=14336, vocab=32000, experts=8, active_experts=2, expert_ffn=14336, context=32768,
        sources=(f"{_HF}/mistralai/Mixtral-8x7B-Instruct-v0.1/blob/main/config.json",)),
    "deepseek-v3": dict(
        params=671e9, active_params=37e9, layers=61, hidden=7168, heads=128, kv_heads=128, head_dim=128,
        qk_head_dim=192, v_head_dim=128, kv_latent=576, ffn=18432, vocab=129280, experts=256, active_experts=8,
        expert_ffn=2048, shared_experts=1, dense_layers=3, context=163840,
        sources=(f"{_HF}/deepseek-ai/DeepSeek-V3/blob/main/config.json",
                 f"{_HF}/deepseek-ai/DeepSeek-R1-0528/blob/main/config.json", "https://arxiv.org/abs/2412.19437")),
    "qwen3-8b": dict(
        params=8190735360, layers=36, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=12288, vocab=151936,
        context=40960, sources=(f"{_HF}/Qwen/Qwen3-8B/blob/main/config.json",)),
    "qwen3-14b": dict(
        params=14768307200, layers=40, hidden=5120, heads=40, kv_heads=8, head_dim=128, ffn=17408, vocab=151936,
        context=40960, sources=(f"{_HF}/Qwen/Qwen3-14B/blob/main/config.json",)),
    "qwen3-32b": dict(
        params=32762123264, layers=64, hidden=5120, heads=64, kv_heads=8, head_dim=128, ffn=25600, vocab=151936,
        context=40960, sources=(f"{_HF}/Qwen/Qwen3-32B/blob/main/config.json",)),
    "qwen3-235b-a22b": dict(
        params=235093634560, active_params=22.14e9, layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128,
        ffn=12288, vocab=151936, experts=128, active_experts=8, expert_ffn=1536, context=262144,
        sources=(f"{_HF}/Qwen/Qwen3-235B-A22B-Instruct-2507-FP8/blob/main/config.json",)),
}


@dataclass(frozen=True)
class Architecture:
    """One model as serving sees it; every size in parameters (weights) or values (cache)."""

    name: str
    params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    context: int
    active_params: float = 0.0
    ffn: int = 0
    experts: int = 1
    active_experts: int = 1
    expert_ffn: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    qk_head_dim: int = 0
    v_head_dim: int = 0
    kv_latent: int = 0
    sources: Tuple[str, ...] = ()

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def active(self) -> float:
        """Parameters each token multiplies through (all of them for a dense model)."""
        return self.active_params or self.params

    @property
    def expert_params(self) -> float:
        """The routed experts' parameters (gated MLPs of three hidden x expert_ffn matrices)."""
        if not self.is_moe:
            return 0.0
        return float((self.layers - self.dense_layers) * self.experts * 3 * self.hidden * self.expert_ffn)

    @property
    def head_params(self) -> float:
        """The output layer (vocab x hidden), read at every decode step; the input embedding is only looked up."""
        return float(self.vocab * self.hidden)

    @property
    def attention_width(self) -> int:
        """heads x (score width + value width): causal attention's multiply-adds per token, layer and context token."""
        return self.heads * ((self.qk_head_dim or self.head_dim) + (self.v_head_dim or self.head_dim))

    def kv_values_per_token(self) -> int:
        """Cached values per token over all layers (K and V, or the latent)."""
        per_layer = self.kv_latent or 2 * self.kv_heads * self.head_dim
        return self.layers * per_layer

    def kv_split(self, tp: int) -> int:
        """Ranks one token's cache is divided over: a latent is held whole on each; K/V heads split up to kv_heads."""
        return 1 if self.kv_latent else max(1, min(tp, self.kv_heads))

    def expert_fraction_read(self, tokens: float) -> float:
        """Expected share of the routed experts a step of `tokens` touches (uniform top-k routing): 1 - (1 - k/E)^n."""
        if not self.is_moe:
            return 1.0
        return 1.0 - (1.0 - self.active_experts / self.experts) ** max(tokens, 1.0)


def names() -> List[str]:
    return sorted(MODELS) + sorted(ALIASES)


@cache
def get(name: str) -> Architecture:
    """The architecture named (or aliased); KeyError for another name."""
    key = ALIASES.get(name, name)
    raw = dict(MODELS[key])
    return Architecture(name=key, **raw)

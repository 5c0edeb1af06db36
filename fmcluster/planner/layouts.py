"""Parallel layouts a group of GPUs can run: tensor x pipeline x data (x expert) parallelism.

Ranks are ordered as Megatron-LM does (tensor innermost, then data/expert, pipeline
outermost; Narayanan et al., arXiv:2104.04473 §3): a tensor-parallel group sits inside
one NVLink domain, a data-parallel group has stride tp, an expert group stride tp and
span tp x ep, a pipeline stage spans gpus / pp consecutive GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List

from fmcluster.planner.hardware import Hardware
from fmcluster.planner.models import Model

TENSOR_PARALLEL = (1, 2, 4, 8)


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    ep: int
    micro_batch: int
    microbatches: int  # per data-parallel rank and step (gradient accumulation x pipeline)
    seq: int

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def tokens_per_step(self) -> int:
        return self.microbatches * self.micro_batch * self.dp * self.seq

    @property
    def expert_dp(self) -> int:
        """Replicas of one expert shard: the data-parallel degree expert gradients reduce over."""
        return self.dp // self.ep

    def key(self) -> str:
        return f"tp{self.tp}-pp{self.pp}-dp{self.dp}" + (f"-ep{self.ep}" if self.ep > 1 else "")

    def summary(self) -> Dict[str, Any]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep, "micro_batch": self.micro_batch,
                "microbatches": self.microbatches, "tokens_per_step": self.tokens_per_step}


def divisors(n: int) -> List[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_layouts(model: Model, hw: Hardware, global_batch_tokens: float, micro_batch: int) -> List[Layout]:
    """Every (tp, pp, dp, ep) that divides the group: tp in 1/2/4/8 within an NVLink domain and
    dividing the attention heads (Megatron's rule), pp up to the layer count, ep dividing both
    the experts and dp (expert ranks are taken from the data-parallel ranks)."""
    gpus = hw.gpus
    sequences = max(1, math.ceil(global_batch_tokens / model.seq))
    out: List[Layout] = []
    for tp in TENSOR_PARALLEL:
        if tp > min(hw.domain, gpus) or gpus % tp or model.heads % tp:
            continue
        for pp in divisors(gpus // tp):
            if pp > model.layers:
                break
            dp = gpus // (tp * pp)
            per_rank = math.ceil(sequences / dp)
            microbatches = max(1, math.ceil(per_rank / micro_batch))
            eps = [e for e in divisors(model.experts) if dp % e == 0] if model.is_moe else [1]
            out.extend(Layout(tp, pp, dp, ep, micro_batch, microbatches, model.seq) for ep in eps)
    return out


def stage_params(model: Model, layout: Layout) -> Dict[str, float]:
    """Parameters one GPU holds before data-parallel sharding, on the heaviest pipeline stage.

    Layers split evenly (ceil); the first and last stage each hold one embedding table
    (both when pp = 1); dense weights split over tp, expert weights over tp x ep (Megatron
    Core's default expert tensor parallelism equals tp). MoE layers are assumed to be on
    the stage, dense layers' extra weights averaged in: an approximation for DeepSeek-style
    models with a few dense layers.
    """
    layers_here = math.ceil(model.layers / layout.pp)
    emb = model.embedding_params
    emb_here = emb if layout.pp == 1 else emb / 2
    body = model.params - emb
    experts = model.expert_params
    dense_per_layer = (body - experts) / model.layers
    expert_layers_here = min(layers_here, model.moe_layers)
    expert_per_layer = experts / model.moe_layers if model.moe_layers else 0.0
    return {
        "layers": float(layers_here),
        "dense": (layers_here * dense_per_layer + emb_here) / layout.tp,
        "expert": expert_layers_here * expert_per_layer / (layout.tp * layout.ep),
        "moe_layers": float(expert_layers_here),
    }

"""Parallel layouts a group of GPUs can run: tensor x context x pipeline x data (x expert) parallelism.

Ranks are ordered as Megatron-LM does (tensor innermost, then context, then data/expert,
pipeline outermost; Narayanan et al., arXiv:2104.04473 §3): a tensor-parallel group sits
inside one NVLink domain, a context-parallel group has stride tp, a data-parallel group
stride tp x cp, a pipeline stage spans gpus / pp consecutive GPUs. Expert layers re-fold the
tp x cp x dp ranks of a stage (Megatron Core "MoE parallel folding"): expert tensor
parallelism etp (tp, or 1) times ep expert ranks times the expert data-parallel rest; with
etp = 1 an expert group is ep consecutive ranks, so one 72-GPU NVLink domain holds up to 72.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
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
    cp: int = 1  # context parallelism: each rank holds seq / cp tokens of every sequence
    vp: int = 1  # virtual pipeline stages per GPU (interleaved 1F1B)
    etp: int = 0  # expert tensor parallelism; 0 = tp (Megatron Core's default)

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def tokens_per_step(self) -> int:
        return self.microbatches * self.micro_batch * self.dp * self.seq

    @property
    def dense_dp(self) -> int:
        """Ranks holding the same dense weights: data x context parallel (both see the same weights)."""
        return self.dp * self.cp

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    @property
    def expert_dp(self) -> int:
        """Replicas of one expert shard: the ranks expert gradients reduce over."""
        return max(1, self.tp * self.cp * self.dp // (self.ep * self.expert_tp))

    def key(self) -> str:
        return (f"tp{self.tp}" + (f"-cp{self.cp}" if self.cp > 1 else "") + f"-pp{self.pp}"
                + (f"-vp{self.vp}" if self.vp > 1 else "") + f"-dp{self.dp}"
                + (f"-ep{self.ep}" if self.ep > 1 else "") + (f"-etp{self.expert_tp}" if self.ep > 1 and
                                                              self.expert_tp != self.tp else ""))

    def summary(self) -> Dict[str, Any]:
        return {"tp": self.tp, "cp": self.cp, "pp": self.pp, "vp": self.vp, "dp": self.dp, "ep": self.ep,
                "etp": self.expert_tp, "micro_batch": self.micro_batch, "microbatches": self.microbatches,
                "tokens_per_step": self.tokens_per_step}


def divisors(n: int) -> List[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


CONTEXT_PARALLEL_MIN_TOKENS = 2048  # a context-parallel rank keeps at least this many tokens of a sequence
MAX_VIRTUAL_STAGES = 8


def context_parallel_degrees(model: Model) -> List[int]:
    """1, and powers of two that split the sequence into 2 x cp equal chunks (the load-balanced causal split) of at
    least CONTEXT_PARALLEL_MIN_TOKENS per rank."""
    out, cp = [1], 2
    while model.seq % (2 * cp) == 0 and model.seq // cp >= CONTEXT_PARALLEL_MIN_TOKENS:
        out.append(cp)
        cp *= 2
    return out


def uneven(model: Model, layout: Layout) -> bool:
    """Layers that do not divide by pp x vp: the stages (or their model chunks) hold different numbers of layers."""
    return layout.pp > 1 and model.layers % (layout.pp * layout.vp) != 0


def virtual_stages(model: Model, layout: Layout, uneven_ok: bool = True) -> List[int]:
    """Interleaved 1F1B: 1, 2, 4, ... up to the most model chunks per GPU (MAX_VIRTUAL_STAGES, each chunk at least
    one layer), and that most; the schedule needs at least pp micro-batches in flight. Without uneven stages, only the
    v whose pp x v divides the layers."""
    if layout.pp == 1 or layout.microbatches < layout.pp:
        return [1]
    most = min(MAX_VIRTUAL_STAGES, math.ceil(model.layers / layout.pp))
    options = sorted({v for v in (1, 2, 4, 8) if v <= most} | {most})
    return [v for v in options if uneven_ok or model.layers % (layout.pp * v) == 0] or [1]


def enumerate_layouts(model: Model, hw: Hardware, global_batch_tokens: float, micro_batch: int,
                      uneven_ok: bool = True) -> List[Layout]:
    """Every (tp, cp, pp, dp, ep, etp) that divides the group: tp in 1/2/4/8 within an NVLink domain and
    dividing the attention heads (Megatron's rule), cp from context_parallel_degrees, pp up to the layer count (and
    dividing it unless the framework splits stages unevenly); for experts, ep dividing the experts and the stage's
    data-parallel ranks (etp = tp), or its tp x cp x dp ranks (etp = 1). Virtual stages are chosen per layout by the
    search (virtual_stages)."""
    gpus = hw.gpus
    sequences = max(1, math.ceil(global_batch_tokens / model.seq))
    out: List[Layout] = []
    for tp in TENSOR_PARALLEL:
        if tp > min(hw.domain, gpus) or gpus % tp or model.heads % tp:
            continue
        for cp in context_parallel_degrees(model):
            if (gpus // tp) % cp:
                continue
            for pp in divisors(gpus // (tp * cp)):
                if pp > model.layers:
                    break
                if not uneven_ok and model.layers % pp:
                    continue
                dp = gpus // (tp * cp * pp)
                per_rank = math.ceil(sequences / dp)
                microbatches = max(1, math.ceil(per_rank / micro_batch))
                base = Layout(tp, pp, dp, 1, micro_batch, microbatches, model.seq, cp=cp)
                out.extend(expert_layouts(model, base))
    return out


def expert_layouts(model: Model, base: Layout) -> List[Layout]:
    if not model.is_moe:
        return [base]
    out = [replace(base, ep=e) for e in divisors(model.experts) if base.dense_dp % e == 0]
    if base.tp > 1:  # expert groups folded over the tensor ranks too, experts not split by tensor parallelism
        ranks = base.tp * base.dense_dp
        out += [replace(base, ep=e, etp=1) for e in divisors(model.experts) if e > 1 and ranks % e == 0]
    return out


@lru_cache(maxsize=16384)
def stage_params(model: Model, layout: Layout) -> Dict[str, float]:
    """Parameters one GPU holds before data-parallel sharding, on the heaviest pipeline stage.

    Layers split evenly (ceil); the first and last stage each hold one embedding table
    (both when pp = 1); dense weights split over tp, expert weights over etp x ep. MoE layers are assumed to be on
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
        "expert": expert_layers_here * expert_per_layer / (layout.expert_tp * layout.ep),
        "moe_layers": float(expert_layers_here),
    }

"""Lower bounds of one training step: compute at a stated MFU, the pipeline bubble, and
every collective on the link it runs on.

Model FLOPs per token = 6N + 12 L h s (Chowdhery et al., PaLM, arXiv:2204.02311 App. B,
the definition of MFU; 6N is Kaplan et al., arXiv:2001.08361 §2.1), N the active
parameters less the input embedding (a lookup). Full recomputation repeats the forward
pass: 8N instead of 6N (Korthikanti et al., arXiv:2205.05198 §5, ~33% overhead).
Compute = FLOPs x tokens / (GPUs x dense peak x MFU). The 1F1B pipeline adds a bubble
of (pp - 1) / microbatches of it (Narayanan et al., arXiv:2104.04473 §2.2.1).

Collectives per step: data parallel gradients at the framework's wire precision
(frameworks.py: all-reduce; a sharded optimizer reduce-scatters gradients and all-gathers
weights; ZeRO-3/FSDP all-gather forward and backward and reduce-scatter for every
micro-batch, ZeRO §7.2); tensor parallel 4 all-reduces of
b x s x h activations per layer and micro-batch (Shoeybi et al., arXiv:1909.08053 §3;
sequence parallelism moves the same volume); pipeline point-to-point of the activations
and their gradients; expert parallel 4 all-to-alls per MoE layer and micro-batch
(dispatch and combine, forward and backward; Lepikhin et al., GShard, arXiv:2006.16668).

The step bound assumes perfect overlap: max(compute + bubble, all NVLink time, all
inter-node time). The serial sum (no overlap) is reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

from fmcluster.planner import collectives as c
from fmcluster.planner.frameworks import GATHER_FOR_COMPUTE, SCATTER_EVERY_MICROBATCH, SCATTER_GATHER_ONCE, Sharding
from fmcluster.planner.hardware import Hardware
from fmcluster.planner.layouts import Layout, stage_params
from fmcluster.planner.models import Model

ACT_BYTES = 2  # bf16 activations on the wire


@dataclass(frozen=True)
class Step:
    compute_s: float
    bubble_s: float
    collectives: List[c.Collective]
    tokens: int
    flops_per_token: float

    @property
    def nvlink_s(self) -> float:
        return sum(x.nvlink_s for x in self.collectives)

    @property
    def internode_s(self) -> float:
        return sum(x.internode_s for x in self.collectives)

    @property
    def bound_s(self) -> float:
        return max(self.compute_s + self.bubble_s, self.nvlink_s, self.internode_s)

    @property
    def serial_s(self) -> float:
        return self.compute_s + self.bubble_s + sum(x.seconds for x in self.collectives)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.bound_s if self.bound_s > 0 else 0.0

    def summary(self) -> Dict[str, Any]:
        return {"compute_s": self.compute_s, "bubble_s": self.bubble_s, "nvlink_s": self.nvlink_s,
                "internode_s": self.internode_s, "bound_s": self.bound_s, "serial_s": self.serial_s,
                "tokens": self.tokens, "tokens_per_s": self.tokens_per_s, "flops_per_token": self.flops_per_token,
                "collectives": [collective_summary(x) for x in self.collectives]}


def collective_summary(x: c.Collective) -> Dict[str, Any]:
    return {"name": x.name, "kind": x.kind, "group": x.group, "ranks": x.ranks, "bytes_per_call": x.bytes_per_call,
            "calls": x.calls, "link": x.link, "nvlink_s": x.nvlink_s, "internode_s": x.internode_s,
            "seconds": x.seconds, "formula": x.formula}


def flops_per_token(model: Model, recompute: str) -> float:
    n = model.active_params - model.vocab * model.hidden
    attention = 12.0 * model.layers * model.hidden * model.seq
    per_token = 6.0 * n + attention
    return per_token * 8 / 6 if recompute == "full" else per_token


def step(model: Model, hw: Hardware, layout: Layout, sharding: Sharding, recompute: str, mfu: float) -> Step:
    tokens = layout.tokens_per_step
    fpt = flops_per_token(model, recompute)
    compute = fpt * tokens / (hw.gpus * hw.peak_flops * mfu)
    bubble = compute * (layout.pp - 1) / layout.microbatches
    return Step(compute, bubble, communication(model, hw, layout, sharding, recompute), tokens, fpt)


def communication(model: Model, hw: Hardware, layout: Layout, sharding: Sharding, recompute: str) -> List[c.Collective]:
    p = stage_params(model, layout)
    nvl, net, link = hw.nvlink_bytes_s, hw.internode_bytes_s_per_gpu, hw.internode_link
    m, b, s, h, t = layout.microbatches, layout.micro_batch, model.seq, model.hidden, layout.tp
    out: List[c.Collective] = []
    forward_passes = 2 if recompute == "full" else 1

    def data_parallel(name: str, group: str, params: float, ranks: int, stride: int) -> None:
        if ranks <= 1 or params <= 0:
            return
        per_domain = c.members_per_domain(ranks, stride, hw.domain, hw.gpus)
        grads, weights = params * sharding.grad_wire_bytes, params * sharding.weight_wire_bytes
        g, w = sharding.grad_wire_bytes, sharding.weight_wire_bytes

        def add(label: str, kind: str, size: float, calls: float, formula: str) -> None:
            nvl_s, net_s = c.hierarchical(kind, size, ranks, per_domain, nvl, net)
            out.append(c.Collective(f"{name} {label}", kind, group, ranks, size, calls, calls * nvl_s, calls * net_s,
                                    formula, link))

        if sharding.pattern == GATHER_FOR_COMPUTE:
            # per micro-batch: weights gathered for every forward pass and for backward, gradients reduce-scattered
            gathers = (forward_passes + 1) * m
            add("weight all-gather", c.ALL_GATHER, weights, gathers,
                f"(passes+1) x microbatches x (n-1)/n x {w} bytes x params")
            add("gradient reduce-scatter", c.REDUCE_SCATTER, grads, m, f"microbatches x (n-1)/n x {g} bytes x params")
        elif sharding.pattern == SCATTER_EVERY_MICROBATCH and m > 1:
            # sharded gradients cannot accumulate whole: each micro-batch's are reduce-scattered to their owners
            # (DeepSpeed stage 2), then the updated weight shards are all-gathered once
            add("gradient reduce-scatter", c.REDUCE_SCATTER, grads, m, f"microbatches x (n-1)/n x {g} bytes x params")
            add("weight all-gather", c.ALL_GATHER, weights, 1, f"(n-1)/n x {w} bytes x params")
        elif sharding.pattern in (SCATTER_GATHER_ONCE, SCATTER_EVERY_MICROBATCH):
            add("gradient reduce-scatter", c.REDUCE_SCATTER, grads, 1, f"(n-1)/n x {g} bytes x params, hierarchical")
            add("weight all-gather", c.ALL_GATHER, weights, 1, f"(n-1)/n x {w} bytes x params, hierarchical")
        else:
            add("gradient all-reduce", c.ALL_REDUCE, grads, 1, f"2(n-1)/n x {g} bytes x params, hierarchical")

    data_parallel("data-parallel", "dp", p["dense"], layout.dp, t)
    data_parallel("expert data-parallel", "dp-expert", p["expert"], layout.expert_dp, t * layout.ep)
    if t > 1:
        size = float(b * s * h * ACT_BYTES)
        calls = (2 + 2 * forward_passes) * p["layers"] * m
        one = c.ring_seconds(c.ALL_REDUCE, size, t, nvl)
        out.append(c.Collective("tensor-parallel activations", c.ALL_REDUCE, "tp", t, size, calls, calls * one, 0.0,
                                "(2 + 2 x passes) x layers/pp x microbatches x 2(t-1)/t x b s h x 2 bytes", link))
    if layout.pp > 1:
        size = float(b * s * h * ACT_BYTES / t)
        calls = 2 * m
        same_domain = hw.gpus // layout.pp < hw.domain
        secs = calls * size / (nvl if same_domain else net)
        out.append(c.Collective("pipeline send/recv", c.SEND_RECV, "pp", 2, size, calls,
                                secs if same_domain else 0.0, 0.0 if same_domain else secs,
                                "2 x microbatches x b s h x 2 bytes / t", link))
    if layout.ep > 1 and p["moe_layers"]:
        size = float(b * s / t * model.active_experts * h * ACT_BYTES)
        calls = (2 + 2 * forward_passes) * p["moe_layers"] * m
        per_domain = c.members_per_domain(layout.ep, t, hw.domain, hw.gpus)
        a2a = c.all_to_all(size, layout.ep, per_domain, nvl, net)
        out.append(c.Collective("expert all-to-all", c.ALL_TO_ALL, "ep", layout.ep, size, calls, calls * a2a[0],
                                calls * a2a[1], "(2 + 2 x passes) x moe layers/pp x microbatches x "
                                "(b s / t) x top-k x h x 2 bytes x (n-1)/n", link))
    return out

"""Lower bounds of one training step: compute at the --mfu share of peak, the pipeline bubble,
and every collective on the link it runs on.

Model FLOPs per token = 6N + 3 L s a (d_qk + d_v): 6N for the matrix multiplies (Kaplan et
al., arXiv:2001.08361 §2.1), N the active parameters less the input embedding (a lookup);
attention scores and values over a causal mask, half of PaLM's 12 L h s (Chowdhery et al.,
arXiv:2204.02311 App. B, which counts the full s x s square), with a heads of score width
d_qk and value width d_v (h / a each for standard attention, 192 and 128 for DeepSeek-V3's
multi-head latent attention). Full recomputation repeats the forward pass: x 8/6 (Korthikanti
et al., arXiv:2205.05198 §5). Compute runs at the calibrated rates of rates.py (GEMMs at the precision's peak,
attention at BF16's), or, with --mfu, every FLOP at that share of the dense peak. The
1F1B pipeline adds a bubble of (pp - 1) / microbatches of it, the interleaved schedule with v
virtual stages (pp - 1) / (v x microbatches) (Narayanan et al., arXiv:2104.04473 §2.2).

Collectives per step: data parallel gradients at the framework's wire precision
(frameworks.py: all-reduce; a sharded optimizer reduce-scatters gradients and all-gathers
weights; ZeRO-3/FSDP all-gather forward and backward and reduce-scatter for every
micro-batch, ZeRO §7.2); tensor parallel 4 all-reduces of
b x s x h activations per layer and micro-batch (Shoeybi et al., arXiv:1909.08053 §3;
sequence parallelism moves the same volume); context parallel ring attention passes each
rank's keys and values around the cp ranks (Liu et al., Ring Attention, arXiv:2310.01889),
forward, and keys, values and their gradients backward; pipeline point-to-point of the
activations and their gradients, v times per micro-batch when interleaved; expert parallel
4 all-to-alls per MoE layer and micro-batch (dispatch and combine, forward and backward;
Lepikhin et al., GShard, arXiv:2006.16668), dispatch at 1 byte per value with fp8 (DeepSeek-V3
§3.3.2 keeps the combine in bf16), and with node-limited routing (a token's experts on at most
M nodes, DeepSeek-V3 §2.1.2) each token crosses the network at most once per remote node.

The step bound assumes perfect overlap: max(compute + bubble, all NVLink time, all
inter-node time). The serial sum (no overlap) is reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from fmcluster.planner import collectives as c
from fmcluster.planner.frameworks import GATHER_FOR_COMPUTE, SCATTER_EVERY_MICROBATCH, SCATTER_GATHER_ONCE, Sharding
from fmcluster.planner.hardware import Hardware
from fmcluster.planner.layouts import Layout, stage_params
from fmcluster.planner.models import Model
from fmcluster.planner.rates import Compute, compute

ACT_BYTES = 2  # bf16 activations on the wire


@dataclass(frozen=True)
class Step:
    compute_s: float
    bubble_s: float
    collectives: List[c.Collective]
    tokens: int
    flops_per_token: float
    rates: Optional[Compute] = None  # how the compute time splits between GEMMs and attention

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
        return {"compute_s": self.compute_s, **({"compute": self.rates.summary()} if self.rates else {}),
                "bubble_s": self.bubble_s, "nvlink_s": self.nvlink_s,
                "internode_s": self.internode_s, "bound_s": self.bound_s, "serial_s": self.serial_s,
                "tokens": self.tokens, "tokens_per_s": self.tokens_per_s, "flops_per_token": self.flops_per_token,
                "collectives": [collective_summary(x) for x in self.collectives]}


def collective_summary(x: c.Collective) -> Dict[str, Any]:
    return {"name": x.name, "kind": x.kind, "group": x.group, "ranks": x.ranks, "bytes_per_call": x.bytes_per_call,
            "calls": x.calls, "link": x.link, "nvlink_s": x.nvlink_s, "internode_s": x.internode_s,
            "seconds": x.seconds, "formula": x.formula}


def flops_per_token(model: Model, recompute: str) -> float:
    n = model.active_params - model.vocab * model.hidden
    attention = 3.0 * model.layers * model.seq * model.attention_width
    per_token = 6.0 * n + attention
    return per_token * 8 / 6 if recompute == "full" else per_token


def step(model: Model, hw: Hardware, layout: Layout, sharding: Sharding, recompute: str, mfu: Optional[float] = None,
         framework: str = "megatron") -> Step:
    """`mfu` None: the calibrated rates of `framework`; a fraction: every FLOP at that share of the dense peak."""
    tokens = layout.tokens_per_step
    fpt = flops_per_token(model, recompute)
    rates = compute(model, hw, layout, recompute, framework, mfu)
    bubble = rates.total * (layout.pp - 1) / (layout.vp * layout.microbatches)
    return Step(rates.total, bubble, communication(model, hw, layout, sharding, recompute), tokens, fpt, rates)


def communication(model: Model, hw: Hardware, layout: Layout, sharding: Sharding, recompute: str) -> List[c.Collective]:
    p = stage_params(model, layout)
    nvl, net, link = hw.nvlink_bytes_s, hw.internode_bytes_s_per_gpu, hw.internode_link
    m, b, s, h, t, cp = layout.microbatches, layout.micro_batch, model.seq, model.hidden, layout.tp, layout.cp
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

    data_parallel("data-parallel", "dp", p["dense"], layout.dense_dp, t)
    data_parallel("expert data-parallel", "dp-expert", p["expert"], layout.expert_dp, layout.expert_tp * layout.ep)
    if t > 1:
        size = float(b * s / cp * h * ACT_BYTES)
        calls = (2 + 2 * forward_passes) * p["layers"] * m
        one = c.ring_seconds(c.ALL_REDUCE, size, t, nvl)
        out.append(c.Collective("tensor-parallel activations", c.ALL_REDUCE, "tp", t, size, calls, calls * one, 0.0,
                                "(2 + 2 x passes) x layers/pp x microbatches x 2(t-1)/t x b (s/cp) h x 2 bytes", link))
    if cp > 1:
        kv_width = max(model.kv_heads // t, 1) * ((model.qk_head_dim or model.head_dim) + (model.v_head_dim or
                                                                                           model.head_dim))
        size = float(b * s / cp * kv_width * ACT_BYTES)  # one rank's keys and values of its chunk
        calls = (forward_passes + 2) * (cp - 1) * p["layers"] * m  # backward passes keys, values and their gradients
        per_domain = c.members_per_domain(cp, t, hw.domain, hw.gpus)
        secs = size / (nvl if per_domain >= cp else net)
        out.append(c.Collective("context-parallel keys/values", c.SEND_RECV, "cp", cp, size, calls,
                                calls * secs if per_domain >= cp else 0.0, 0.0 if per_domain >= cp else calls * secs,
                                "(passes + 2) x (cp-1) x layers/pp x microbatches x b (s/cp) x kv heads/t x "
                                "(d_qk + d_v) x 2 bytes, ring", link))
    if layout.pp > 1:
        size = float(b * s / cp * h * ACT_BYTES / t)
        calls = 2 * m * layout.vp
        same_domain = hw.gpus // layout.pp < hw.domain
        secs = calls * size / (nvl if same_domain else net)
        out.append(c.Collective("pipeline send/recv", c.SEND_RECV, "pp", 2, size, calls,
                                secs if same_domain else 0.0, 0.0 if same_domain else secs,
                                "2 x v x microbatches x b (s/cp) h x 2 bytes / t", link))
    if layout.ep > 1 and p["moe_layers"]:
        out.append(expert_all_to_all(model, hw, layout, p["moe_layers"], forward_passes))
    return out


def expert_all_to_all(model: Model, hw: Hardware, layout: Layout, moe_layers: float, forward_passes: int) -> c.Collective:
    """Dispatch and combine, forward and backward. Each rank sends its tokens' k expert copies; dispatches go at
    1 byte per value with fp8 (combines stay bf16). Under node-limited routing a token crosses the network at most
    once per remote node it is routed to (at most M), and is forwarded to its experts there over NVLink."""
    b, s, h = layout.micro_batch, model.seq, model.hidden
    tokens = b * s / (layout.cp * layout.tp)  # sequence parallel: each tensor rank holds 1/t of the tokens
    k, ep = model.active_experts, layout.ep
    stride = layout.tp if layout.expert_tp == layout.tp else 1  # folded over tensor ranks: consecutive ranks
    per_domain = c.members_per_domain(ep, stride, hw.domain, hw.gpus)
    domains = max(1, -(-ep // per_domain))
    dispatch_bytes = 1.0 if hw.precision == "fp8" else float(ACT_BYTES)
    per_call_bytes = (dispatch_bytes + ACT_BYTES) / 2  # dispatch and combine alternate
    calls = (2 + 2 * forward_passes) * moe_layers * layout.microbatches
    if model.routed_nodes and domains > 1:
        remote = min(k, model.routed_nodes) * (domains - 1) / domains  # copies that cross the network per token
    else:
        remote = k * (ep - min(per_domain, ep)) / ep
    # NVLink carries the copies for in-domain experts, and forwards remote copies to their GPUs after deduplication
    local = k * (min(per_domain, ep) - 1) / ep + max(0.0, k * (ep - min(per_domain, ep)) / ep - remote)
    if hw.nvlink_bytes_s <= 0:  # no NVLink (one GPU per node): every copy to another GPU crosses the network
        remote, local = remote + max(local, 0.0), 0.0
    size = tokens * k * h * per_call_bytes
    nvl_s = tokens * local * h * per_call_bytes / hw.nvlink_bytes_s if local > 0 else 0.0
    net_s = (tokens * remote * h * per_call_bytes / hw.internode_bytes_s_per_gpu) if remote else 0.0
    formula = ("(2 + 2 x passes) x moe layers/pp x microbatches x (b s / (cp t)) x top-k x h x bytes (dispatch "
               f"{dispatch_bytes:g}, combine {ACT_BYTES}) x share per link"
               + (f"; node-limited: at most {model.routed_nodes} remote nodes per token" if model.routed_nodes else ""))
    return c.Collective("expert all-to-all", c.ALL_TO_ALL, "ep", ep, size, calls, calls * nvl_s, calls * net_s,
                        formula, hw.internode_link)

"""Every figure of one layout, as `--json` shows it: value, unit, formula and inputs.

Where a formula is arithmetic over its inputs' names (+ - * / ** parentheses, max and min), it is the formula of
the value: evaluated with its inputs it gives the value (tests/planner/test_planner_formulas.py holds every such one).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from fmcluster.planner import collectives as coll
from fmcluster.planner.figures import fig
from fmcluster.planner.hardware import HBM_USABLE_FRACTION, Hardware
from fmcluster.planner.layouts import Layout, stage_params
from fmcluster.planner.memory import GATHERED_LAYERS, RECOMPUTE, activations, in_flight, layer_bytes_per_token
from fmcluster.planner.models import Model
from fmcluster.planner.rates import (
    HIDDEN_HALF,
    attention_flops_per_token,
    elementwise_rate,
    gemm_flops_per_token,
    recompute_factor,
)
from fmcluster.planner.search import Candidate, batch_warning, describe
from fmcluster.planner.steptime import collective_summary

COLUMNS = {
    "memory_gib": "weights + gradients + optimizer + activations per GPU (see best[].memory for each term)",
    "bound_s": "max(compute + bubble, NVLink seconds, inter-node seconds)",
    "estimate_s": "max(bound, compute + bubble + exposed communication): what orders the layouts",
    "estimate_mfu": "model FLOPs (no recomputation) x tokens per step / (GPUs x peak x estimate)",
    "serial_s": "compute + bubble + every collective (no overlap)",
    "tokens_per_step": "data-parallel ranks x micro-batches x micro-batch x seq: every rank runs at least one "
                       "micro-batch, so this can exceed the requested --global-batch-tokens",
    "in_tie_group": "the estimate cannot order this layout against the fastest (jobs[].ties)",
}
RECOMPUTE_FACTOR = {"none": 1.0, "selective": 1.0, "full": 8 / 6}  # forward passes repeated, as FLOPs count them


def sharding_key(c: Candidate) -> str:
    """'none' for a layout with one data-parallel rank: nothing is replicated or sharded, so it is not DDP."""
    return "none" if c.layout.dense_dp == 1 else c.memory.sharding


def row(c: Candidate, requested_tokens: float, in_ties: bool) -> Dict[str, Any]:
    s = c.step
    return {"layout": c.layout.key(), **c.layout.summary(),
            "batch_differs": c.layout.tokens_per_step != requested_tokens, "sharding": sharding_key(c),
            "recompute": c.memory.recompute, "uneven_stages": c.uneven, "in_tie_group": in_ties,
            "memory_gib": round(c.memory.total / 2**30, 2), "fits": c.fits, "bound_s": round(s.bound_s, 4),
            "estimate_s": round(c.estimate.seconds, 4), "estimate_mfu": round(c.estimate.mfu, 4),
            "serial_s": round(s.serial_s, 4), "compute_s": round(s.compute_s, 4), "nvlink_s": round(s.nvlink_s, 4),
            "internode_s": round(s.internode_s, 4)}


def memory_figures(c: Candidate, model: Model, hw: Hardware) -> Dict[str, Any]:
    lay, mem = c.layout, c.memory
    p = stage_params(model, lay)
    sc = mem.scheme

    def state(term: str, nbytes: int, sharded: bool) -> Dict[str, Any]:
        formula = (f"{nbytes} bytes x (dense params per GPU" + (" / dp" if sharded else "") + " + expert params per GPU"
                   + (" / (dp / ep)" if sharded else "") + ")")
        return fig(getattr(mem, term), "bytes", formula, bytes_per_param=nbytes, dense_params_per_gpu=p["dense"],
                   expert_params_per_gpu=p["expert"], dp=lay.dp, expert_dp=lay.expert_dp, sharded=sharded)

    tokens = lay.micro_batch * model.seq / (lay.cp * lay.tp)
    working = tokens * layer_bytes_per_token(model, "none") if mem.recompute == "full" else 0.0
    logits = 4.0 * lay.micro_batch * model.seq * model.vocab / (lay.tp * lay.cp)
    return {
        "weights": state("weights", sc.weight_bytes, sc.shard_weights),
        "gradients": state("gradients", sc.grad_bytes, sc.shard_grads),
        "optimizer": state("optimizer", sc.optimizer_bytes, sc.shard_optimizer),
        "gathered": fig(mem.gathered, "bytes", f"2 bytes x params of {GATHERED_LAYERS} layers on the stage (gathered for "
                        "compute when weights are sharded)", sharded_weights=sc.shard_weights),
        "activations": fig(mem.activations, "bytes",
                           "tokens_per_gpu * bytes_per_token * layers_on_stage * in_flight + working_set + logits",
                           tokens_per_gpu=tokens, bytes_per_token=layer_bytes_per_token(model, mem.recompute),
                           layers_on_stage=p["layers"], in_flight=in_flight(lay), working_set=working, logits=logits,
                           recompute=mem.recompute, micro_batch=lay.micro_batch, seq=model.seq, tp=lay.tp, cp=lay.cp,
                           vocab=model.vocab),
        "activations_by_recompute": {policy: fig(activations(model, lay, policy), "bytes", "the activations formula "
                                                 "with this recomputation policy", recompute=policy)
                                     for policy in RECOMPUTE},
        "total": fig(mem.total, "bytes", "weights + gradients + optimizer + activations + gathered",
                     weights=mem.weights, gradients=mem.gradients, optimizer=mem.optimizer, activations=mem.activations,
                     gathered=mem.gathered),
        "bytes_per_param": sc.formula(),
        "usable_hbm": fig(hw.usable_hbm_bytes, "bytes", "hbm * fraction", hbm=hw.hbm_bytes,
                          fraction=HBM_USABLE_FRACTION),
        "fits": c.fits,
    }


def step_figures(c: Candidate, model: Model, hw: Hardware, mfu: Optional[float]) -> Dict[str, Any]:
    lay, st, r = c.layout, c.step, c.step.rates
    factor = RECOMPUTE_FACTOR[c.memory.recompute]
    out: Dict[str, Any] = {
        "flops_per_token": fig(st.flops_per_token, "FLOP", "(6 * N + 3 * L * s * a * (d_qk + d_v)) * recompute_factor",
                               N=model.active_params - model.vocab * model.hidden, L=model.layers, s=model.seq,
                               a=model.heads, d_qk=model.qk_head_dim or model.head_dim,
                               d_v=model.v_head_dim or model.head_dim, recompute_factor=factor,
                               note="causal attention: half of the s x s square (6 L h s for standard heads)")}
    if r is not None:
        share = "mfu" if mfu is not None else "calibrated share of peak"
        out["gemm"] = fig(r.gemm_s, "s", "gemm_flops * tokens * recompute / (gpus * gemm_flops_per_s)",
                          gemm_flops=gemm_flops_per_token(model), tokens=st.tokens, gpus=hw.gpus,
                          recompute=recompute_factor(c.memory.recompute), gemm_flops_per_s=r.gemm_rate,
                          width_efficiency=r.width_efficiency,
                          peak_flops=hw.peak_flops, rate=share)
        if r.elementwise_s:
            out["elementwise"] = fig(r.elementwise_s, "s", "gemm_flops * tokens * recompute / (gpus * bf16_gemm_flops_per_s)"
                                     " * hidden_half / h", gemm_flops=gemm_flops_per_token(model), tokens=st.tokens,
                                     gpus=hw.gpus, recompute=recompute_factor(c.memory.recompute),
                                     bf16_gemm_flops_per_s=elementwise_rate(hw, c.framework), hidden_half=HIDDEN_HALF,
                                     h=model.hidden)
        attention = attention_flops_per_token(model)
        out["attention"] = fig(r.attention_s, "s", "attention_flops * tokens * recompute / (gpus * attention_flops_per_s)",
                               attention_flops=attention, tokens=st.tokens, gpus=hw.gpus,
                               recompute=recompute_factor(c.memory.recompute),
                               attention_flops_per_s=r.attention_rate, block_efficiency=r.block_efficiency,
                               bf16_peak_flops=hw.attention_peak_flops, rate=share)
    out.update({
        "compute": fig(st.compute_s, "s", "gemm_s + elementwise_s + attention_s", gemm_s=r.gemm_s if r else st.compute_s,
                       elementwise_s=r.elementwise_s if r else 0.0, attention_s=r.attention_s if r else 0.0,
                       calibrated=mfu is None, mfu=mfu),
        "bubble": fig(st.bubble_s, "s", "compute_s * (pp - 1) / (vp * microbatches)", compute_s=st.compute_s, pp=lay.pp,
                      vp=lay.vp, microbatches=lay.microbatches),
        "collectives": [dict(collective_summary(x), nvlink_bytes_s=hw.nvlink_bytes_s,
                             internode_bytes_s_per_gpu=hw.internode_bytes_s_per_gpu,
                             members_per_domain=coll.members_per_domain(x.ranks, _stride(x.group, lay), hw.domain,
                                                                        hw.gpus))
                        for x in st.collectives],
        "bound": fig(st.bound_s, "s", "max(compute_s + bubble_s, nvlink_s, internode_s)",
                     compute_s=st.compute_s, bubble_s=st.bubble_s, nvlink_s=st.nvlink_s, internode_s=st.internode_s),
        "serial": fig(st.serial_s, "s", "compute + bubble + every collective"),
        "tokens_per_s": fig(st.tokens_per_s, "tokens/s", "tokens / bound_s", tokens=st.tokens, bound_s=st.bound_s),
    })
    return out


def estimate_figures(c: Candidate, hw: Hardware) -> Dict[str, Any]:
    lay, st, e = c.layout, c.step, c.estimate
    exposed = sum(e.exposed.values())
    return {
        "seconds": fig(e.seconds, "s", "max(bound_s, compute_s + bubble_s + exposed_s)", bound_s=st.bound_s,
                       compute_s=e.compute_s, bubble_s=e.bubble_s, exposed_s=exposed,
                       **{f"exposed_{k}_s": v for k, v in e.exposed.items()}),
        "gemm_efficiency": fig(e.gemm_efficiency, "fraction", "min(1, w/(w+64) / (1024/(1024+64))), w the narrowest "
                               "per-GPU GEMM side", tp=lay.tp, etp=lay.expert_tp),
        "bubble": fig(e.bubble_s, "s", "compute_s * (pp - 1) / (vp * microbatches)", compute_s=e.compute_s, pp=lay.pp,
                      vp=lay.vp, microbatches=lay.microbatches),
        "exposed": {k: fig(v, "s", "collective seconds left after the overlap its framework runs (docs/planning.md)",
                           group=k) for k, v in e.exposed.items()},
        "tokens_per_s": fig(st.tokens / e.seconds, "tokens/s", "tokens / estimate_s", tokens=st.tokens,
                            estimate_s=e.seconds),
        "mfu": fig(e.mfu, "fraction", "model_flops_per_token * tokens / (gpus * peak_flops * estimate_s)",
                   model_flops_per_token=st.flops_per_token / RECOMPUTE_FACTOR[c.memory.recompute], tokens=st.tokens,
                   gpus=hw.gpus, peak_flops=hw.peak_flops, estimate_s=e.seconds),
        "model_tflops_per_gpu": fig(e.tflops, "TFLOP/s", "model_flops_per_token * tokens / (gpus * estimate_s) / 1e12",
                                    model_flops_per_token=st.flops_per_token / RECOMPUTE_FACTOR[c.memory.recompute],
                                    tokens=st.tokens, gpus=hw.gpus, estimate_s=e.seconds),
    }


def detail(c: Candidate, model: Model, hw: Hardware, mfu: Optional[float], requested_tokens: float) -> Dict[str, Any]:
    lay = c.layout
    return {"layout": dict(lay.summary(), sharding=sharding_key(c), recompute=c.memory.recompute,
                           description=describe(c), uneven_stages=c.uneven,
                           requested_tokens_per_step=requested_tokens,
                           batch_warning=batch_warning(lay, requested_tokens)),
            "memory": memory_figures(c, model, hw), "step": step_figures(c, model, hw, mfu),
            "estimate": estimate_figures(c, hw)}


def _stride(group: str, lay: Layout) -> int:
    return {"dp": lay.tp, "dp-expert": lay.expert_tp * lay.ep, "tp": 1, "cp": lay.tp,
            "ep": expert_stride(lay)}.get(group, lay.gpus)


def expert_stride(lay: Layout) -> int:
    """Expert groups step over tensor ranks (etp = tp) or run over consecutive ranks (folded, etp = 1)."""
    return lay.tp if lay.expert_tp == lay.tp else 1

"""Assemble the plan: the cluster figures, the cost, and per GPU group the training job's
memory fit, step-time bounds, checkpoints and data path for the model given."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from fmcluster.planner import collectives as coll
from fmcluster.planner.checkpoints import checkpoint, data_path
from fmcluster.planner.cluster import cluster_figures
from fmcluster.planner.cost import hourly_cost, priced_for_job, token_cost
from fmcluster.planner.efficiency import ASSUMPTIONS as ESTIMATE_ASSUMPTIONS
from fmcluster.planner.errors import PlanUsageError
from fmcluster.planner.figures import fig, val
from fmcluster.planner.frameworks import DEFAULT_FRAMEWORK, framework
from fmcluster.planner.hardware import HBM_USABLE_FRACTION, Hardware, of_group
from fmcluster.planner.layouts import stage_params
from fmcluster.planner.memory import GATHERED_LAYERS, RECOMPUTE, activation_coefficient, activations
from fmcluster.planner.models import Model
from fmcluster.planner.search import Candidate, batch_warning, describe, evaluate, overflow_message
from fmcluster.planner.steptime import collective_summary

ASSUMPTIONS = [
    "Bounds (>=) are lower bounds: bandwidth-only collectives (no latency), compute at the --mfu share of peak, perfect "
    "overlap of compute, NVLink and inter-node traffic. Estimates (~) charge what the efficiency model below exposes; "
    "layouts rank by the estimate.",
    f"Usable HBM is {HBM_USABLE_FRACTION:.0%} of the GPU's memory (CUDA context, NCCL buffers, fragmentation).",
    "Bytes per parameter and what is sharded follow the chosen framework's convention (--framework); fp8 changes the "
    "compute peak and the expert dispatch precision, not these bytes.",
    "Sequence parallelism with every tp > 1; the 1F1B pipeline schedule, interleaved with v virtual stages when v > 1; "
    "ring attention for context parallelism; one training job per GPU node group.",
]


@dataclass
class PlanOptions:
    precision: str = "bf16"
    mfu: float = 0.4
    global_batch_tokens: float = 4 * 2**20
    micro_batch: int = 1
    tokens: float = 1e12
    bytes_per_token: float = 4.0
    gradient_gb: float = 14.0
    group: Optional[str] = None
    top: int = 5
    model_option: str = "--model"
    framework: str = DEFAULT_FRAMEWORK
    reservation_prices: Dict[str, float] = field(default_factory=dict)  # node group -> USD per instance-hour


def build(spec: Any, model: Optional[Model], opts: PlanOptions) -> Dict[str, Any]:
    report: Dict[str, Any] = {"cluster": cluster_figures(spec, opts.gradient_gb),
                              "cost": hourly_cost(spec, opts.reservation_prices)}
    if model is None:
        return report
    groups = [g for g in spec.gpu_groups if opts.group in (None, g.name)]
    if opts.group is not None and not groups:
        names = ", ".join(g.name for g in spec.gpu_groups) or "none"
        raise PlanUsageError(f"--group: no GPU node group named {opts.group!r}; GPU groups: {names}")
    if not groups:
        raise PlanUsageError(f"{opts.model_option}: the spec has no GPU node group to train on")
    jobs = [job(spec, g, model, opts, report["cost"]) for g in groups]
    if not any(j["fits"] for j in jobs):
        raise PlanUsageError("\n".join(j["overflow"] for j in jobs))
    report["model"] = model.summary()
    report["options"] = {k: getattr(opts, k) for k in ("precision", "mfu", "global_batch_tokens", "micro_batch", "tokens",
                                                       "bytes_per_token", "framework")}
    fw = framework(opts.framework)
    report["framework"] = {"key": fw.key, "label": fw.label, "source": fw.source,
                           "shardings": [{"key": s.key, "label": s.label, "bytes_per_param": s.formula(),
                                          "weights": s.weight_bytes, "gradients": s.grad_bytes,
                                          "optimizer": s.optimizer_bytes, "gradient_wire_bytes": s.grad_wire_bytes,
                                          "weight_wire_bytes": s.weight_wire_bytes, "data_parallel": s.pattern}
                                         for s in fw.shardings]}
    report["assumptions"] = ASSUMPTIONS + ESTIMATE_ASSUMPTIONS + [f"model: {a}" for a in model.assumptions]
    report["jobs"] = jobs
    return report


def job(spec: Any, group: Any, model: Model, opts: PlanOptions, cost: Dict[str, Any]) -> Dict[str, Any]:
    hw = of_group(group, opts.precision)
    cands = evaluate(model, hw, opts.global_batch_tokens, opts.micro_batch, opts.mfu, opts.framework)
    fitting = [c for c in cands if c.fits]
    out: Dict[str, Any] = {"group": group.name, "hardware": hw.summary(), "layouts_evaluated": len(cands),
                           "layouts_fitting": len(fitting), "fits": bool(fitting),
                           "layouts": [row(c, opts) for c in cands], "columns": COLUMNS,
                           "requested_tokens_per_step": opts.global_batch_tokens}
    if not fitting:
        out["overflow"] = overflow_message(opts.model_option, model, hw, cands)
        if cands:
            out["smallest"] = detail(min(cands, key=lambda c: c.memory.total), model, hw, opts)
        return out
    best = fitting[0]
    out["best"] = [detail(c, model, hw, opts) for c in fitting[: opts.top]]
    out["warnings"] = [f"{b['layout']['description']}: {b['layout']['batch_warning']}" for b in out["best"]
                       if b["layout"]["batch_warning"]]
    lines = priced_for_job(cost, group.name)
    # as token_cost: an unpriced instance leaves the job unpriced; an unpriced service is left out (its line says so)
    priced = all("usd_per_hour" in ln for ln in lines if ln["instance_type"])
    out["checkpoint"] = checkpoint(model, group, spec, best.step, best.memory.scheme.weight_bytes,
                                   best.memory.scheme.optimizer_bytes,
                                   sum(val(ln["usd_per_hour"]) for ln in lines if "usd_per_hour" in ln) if priced
                                   else None)
    out["data_path"] = data_path(best.step, spec, opts.bytes_per_token)
    out["tokens"] = dict(token_cost(opts.tokens, best.step.tokens_per_s, priced_for_job(cost, group.name)),
                         count=opts.tokens)
    est_tokens_s = best.step.tokens / best.estimate.seconds
    est_hours = opts.tokens / est_tokens_s / 3600
    out["tokens"]["estimate_hours"] = fig(est_hours, "h", "tokens / tokens per second at the estimate / 3600",
                                          tokens=opts.tokens, tokens_per_s=est_tokens_s)
    out["tokens"]["estimate_gpu_hours"] = fig(est_hours * hw.gpus, "GPU-h", "estimate hours x GPUs",
                                              hours=est_hours, gpus=hw.gpus)

    if model.is_moe:
        out["expert_parallel"] = expert_parallel(cands, hw)
    return out


COLUMNS = {
    "memory_gib": "weights + gradients + optimizer + activations per GPU (see best[].memory for each term)",
    "bound_s": "max(compute + bubble, NVLink seconds, inter-node seconds)",
    "estimate_s": "max(bound, compute / GEMM efficiency + bubble + exposed communication): what ranks the layouts",
    "estimate_mfu": "model FLOPs (no recomputation) x tokens per step / (GPUs x peak x estimate)",
    "serial_s": "compute + bubble + every collective (no overlap)",
    "tokens_per_step": "data-parallel ranks x micro-batches x micro-batch x seq: every rank runs at least one "
                       "micro-batch, so this can exceed the requested --global-batch-tokens",
}


def sharding_key(c: Candidate) -> str:
    """'none' for a layout with one data-parallel rank: nothing is replicated or sharded, so it is not DDP."""
    return "none" if c.layout.dense_dp == 1 else c.memory.sharding


def row(c: Candidate, opts: PlanOptions) -> Dict[str, Any]:
    s = c.step
    return {"layout": c.layout.key(), **c.layout.summary(),
            "batch_differs": c.layout.tokens_per_step != opts.global_batch_tokens, "sharding": sharding_key(c),
            "recompute": c.memory.recompute,
            "memory_gib": round(c.memory.total / 2**30, 2), "fits": c.fits, "bound_s": round(s.bound_s, 4),
            "estimate_s": round(c.estimate.seconds, 4), "estimate_mfu": round(c.estimate.mfu, 4),
            "serial_s": round(s.serial_s, 4), "compute_s": round(s.compute_s, 4), "nvlink_s": round(s.nvlink_s, 4),
            "internode_s": round(s.internode_s, 4)}


def detail(c: Candidate, model: Model, hw: Hardware, opts: PlanOptions) -> Dict[str, Any]:
    lay, mem, st = c.layout, c.memory, c.step
    p = stage_params(model, lay)
    sc = mem.scheme

    def state(term: str, nbytes: int, sharded: bool) -> Dict[str, Any]:
        formula = (f"{nbytes} bytes x (dense params per GPU" + (" / dp" if sharded else "") + " + expert params per GPU"
                   + (" / (dp / ep)" if sharded else "") + ")")
        return fig(getattr(mem, term), "bytes", formula, bytes_per_param=nbytes, dense_params_per_gpu=p["dense"],
                   expert_params_per_gpu=p["expert"], dp=lay.dp, expert_dp=lay.expert_dp, sharded=sharded)

    coef = activation_coefficient(model, lay.tp, mem.recompute)
    memory = {
        "weights": state("weights", sc.weight_bytes, sc.shard_weights),
        "gradients": state("gradients", sc.grad_bytes, sc.shard_grads),
        "optimizer": state("optimizer", sc.optimizer_bytes, sc.shard_optimizer),
        "gathered": fig(mem.gathered, "bytes", f"2 bytes x params of {GATHERED_LAYERS} layers on the stage (gathered for "
                        "compute when weights are sharded)", sharded_weights=sc.shard_weights),
        "activations": fig(mem.activations, "bytes", "s b h x coefficient x layers on the stage x min(pp, microbatches)"
                           + (" + 34 s b h / t (layer being recomputed)" if mem.recompute == "full" else "")
                           + " + 4 s b v / t (fp32 logits)", s=model.seq, b=lay.micro_batch, h=model.hidden,
                           heads=model.heads, t=lay.tp, coefficient=coef, layers_on_stage=p["layers"],
                           in_flight=min(lay.pp, lay.microbatches), vocab=model.vocab, recompute=mem.recompute),
        "activations_by_recompute": {policy: fig(activations(model, lay, policy), "bytes", "the activations formula "
                                                 "with this recomputation policy", recompute=policy)
                                     for policy in RECOMPUTE},
        "total": fig(mem.total, "bytes", "weights + gradients + optimizer + activations + gathered weights",
                     weights=mem.weights, gradients=mem.gradients, optimizer=mem.optimizer, activations=mem.activations,
                     gathered=mem.gathered),
        "bytes_per_param": sc.formula(),
        "usable_hbm": fig(hw.usable_hbm_bytes, "bytes", "HBM per GPU x usable fraction", hbm=hw.hbm_bytes,
                          fraction=HBM_USABLE_FRACTION),
        "fits": c.fits,
    }
    peak_inputs = dict(gpus=hw.gpus, peak_flops=hw.peak_flops, mfu=opts.mfu, precision=opts.precision)
    step = {
        "compute": fig(st.compute_s, "s", "flops per token x tokens per step / (gpus x dense peak x --mfu)",
                       flops_per_token=st.flops_per_token, tokens=st.tokens, **peak_inputs),
        "flops_per_token": fig(st.flops_per_token, "FLOP", "6 N + 12 L h s (x 8/6 with full recomputation)",
                               N=model.active_params - model.vocab * model.hidden, L=model.layers, h=model.hidden,
                               s=model.seq, recompute=mem.recompute),
        "bubble": fig(st.bubble_s, "s", "compute x (pp - 1) / microbatches", pp=lay.pp, microbatches=lay.microbatches),
        "collectives": [dict(collective_summary(x), nvlink_bytes_s=hw.nvlink_bytes_s,
                             internode_bytes_s_per_gpu=hw.internode_bytes_s_per_gpu,
                             members_per_domain=coll.members_per_domain(x.ranks, _stride(x.group, lay), hw.domain,
                                                                              hw.gpus))
                        for x in st.collectives],
        "bound": fig(st.bound_s, "s", "max(compute + bubble, NVLink seconds, inter-node seconds)",
                     compute_s=st.compute_s, bubble_s=st.bubble_s, nvlink_s=st.nvlink_s, internode_s=st.internode_s),
        "serial": fig(st.serial_s, "s", "compute + bubble + every collective"),
        "tokens_per_s": fig(st.tokens_per_s, "tokens/s", "tokens per step / bound", tokens=st.tokens, bound_s=st.bound_s),
    }
    e = c.estimate
    est = {
        "seconds": fig(e.seconds, "s", "max(bound, compute / GEMM efficiency + bubble + exposed communication)",
                       bound_s=st.bound_s, compute_s=e.compute_s, bubble_s=e.bubble_s, **{
                           f"exposed_{k}_s": v for k, v in e.exposed.items()}),
        "gemm_efficiency": fig(e.gemm_efficiency, "fraction", "min(1, w/(w+64) / (1024/(1024+64))), w the narrowest "
                               "per-GPU GEMM side", tp=lay.tp, etp=lay.expert_tp),
        "bubble": fig(e.bubble_s, "s", "compute / GEMM efficiency x (pp - 1) / (v x microbatches)", pp=lay.pp,
                      vp=lay.vp, microbatches=lay.microbatches),
        "exposed": {k: fig(v, "s", "collective seconds left after the overlap its framework runs (docs/planning.md)",
                           group=k) for k, v in e.exposed.items()},
        "tokens_per_s": fig(st.tokens / e.seconds, "tokens/s", "tokens per step / estimate", tokens=st.tokens,
                            estimate_s=e.seconds),
        "mfu": fig(e.mfu, "fraction", "model FLOPs per token (no recomputation) x tokens / (GPUs x peak x estimate)",
                   tokens=st.tokens, gpus=hw.gpus, peak_flops=hw.peak_flops),
    }
    return {"layout": dict(lay.summary(), sharding=sharding_key(c), recompute=mem.recompute, description=describe(c),
                           requested_tokens_per_step=opts.global_batch_tokens,
                           batch_warning=batch_warning(lay, opts.global_batch_tokens)),
            "memory": memory, "step": step, "estimate": est}


def _stride(group: str, lay: Any) -> int:
    return {"dp": lay.tp, "dp-expert": lay.expert_tp * lay.ep, "tp": 1, "cp": lay.tp,
            "ep": expert_stride(lay)}.get(group, lay.gpus)


def expert_stride(lay: Any) -> int:
    """Expert groups step over tensor ranks (etp = tp) or run over consecutive ranks (folded, etp = 1)."""
    return lay.tp if lay.expert_tp == lay.tp else 1


def expert_parallel(cands: List[Candidate], hw: Hardware) -> List[Dict[str, Any]]:
    """Per expert-parallel degree: does its all-to-all stay inside the NVLink domain?"""
    out: List[Dict[str, Any]] = []
    for ep in sorted({c.layout.ep for c in cands if c.layout.ep > 1}):
        c = next(x for x in cands if x.layout.ep == ep)
        k = coll.members_per_domain(ep, expert_stride(c.layout), hw.domain, hw.gpus)
        a2a = next((x for x in c.step.collectives if x.kind == coll.ALL_TO_ALL), None)
        out.append({"ep": ep, "tp": c.layout.tp, "etp": c.layout.expert_tp, "layout": c.layout.key(), "fits": c.fits,
                    "members_per_domain": k,
                    "share_across_domains": round((ep - k) / (ep - 1), 4), "stays_on_nvlink": k >= ep,
                    "alltoall_nvlink_s": a2a.nvlink_s if a2a else 0.0,
                    "alltoall_internode_s": a2a.internode_s if a2a else 0.0,
                    "formula": "share across domains = (ep - k) / (ep - 1), k = min(ep, domain GPUs / stride), "
                               "stride tp (or 1 when expert groups fold over tensor ranks)"})
    return out

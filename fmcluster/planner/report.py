"""Assemble the plan: the cluster figures, the cost, and per GPU group the training job's
memory fit, step-time bounds, the tie group the estimate cannot order and its pick, a pinned layout (--layout)
against that pick, checkpoints and data path for the model given."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from fmcluster.planner import collectives as coll
from fmcluster.planner.checkpoints import checkpoint, data_path
from fmcluster.planner.cluster import cluster_figures
from fmcluster.planner.cost import hourly_cost, priced_for_job, token_cost
from fmcluster.planner.details import COLUMNS, detail, expert_stride, row
from fmcluster.planner.efficiency import ASSUMPTIONS as ESTIMATE_ASSUMPTIONS
from fmcluster.planner.errors import PlanUsageError
from fmcluster.planner.figures import fig, val
from fmcluster.planner.frameworks import DEFAULT_FRAMEWORK, framework
from fmcluster.planner.hardware import HBM_USABLE_FRACTION, Hardware, of_group
from fmcluster.planner.models import Model
from fmcluster.planner.search import Candidate, evaluate, overflow_message
from fmcluster.planner.ties import ERROR_BAND, TieGroup, same_layout, tie_group, tie_ratio
from fmcluster.planner.ties import summary as tie_summary

ASSUMPTIONS = [
    "Bounds (>=) are lower bounds on communication: bandwidth-only collectives (no latency), perfect overlap of "
    "compute, NVLink and inter-node traffic, compute at the calibrated rates (or --mfu). Estimates (~) charge what "
    "the efficiency model below exposes; the tie group and its pick come from the estimate.",
    f"Usable HBM is {HBM_USABLE_FRACTION:.0%} of the GPU's memory (CUDA context, NCCL buffers, fragmentation).",
    "Bytes per parameter and what is sharded follow the chosen framework's convention (--framework); fp8 speeds up "
    "the GEMMs and the expert dispatch, not attention, communication, memory or the optimizer step.",
    "Sequence parallelism with every tp > 1; the 1F1B pipeline schedule, interleaved with v virtual stages when v > 1; "
    "ring attention for context parallelism; FlashAttention; one training job per GPU node group.",
]
CALIBRATION = {"band": ERROR_BAND, "runs": "fmcluster/planner/data/calibration.json",
               "how": "80% of the published runs lie within ±band of the estimate on their own published layout; "
                      "docs/planning.md, Calibration, lists the runs, the error of each and what is not modelled"}


@dataclass
class PlanOptions:
    precision: str = "bf16"
    mfu: Optional[float] = 0.4  # used only when calibrated is False (--mfu given): every FLOP at this share of peak
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
    calibrated: bool = True  # the calibrated compute rates (rates.py); False: --mfu replaces them
    layout: Optional[Dict[str, int]] = None  # --layout, pinned
    recompute: Optional[str] = None  # --recompute for the pinned layout

    @property
    def compute_mfu(self) -> Optional[float]:
        return None if self.calibrated else self.mfu


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
                                                       "bytes_per_token", "framework", "calibrated", "layout",
                                                       "recompute")}
    fw = framework(opts.framework)
    from fmcluster.planner.rates import CALIBRATED

    report["calibration"] = dict(CALIBRATION, framework=CALIBRATED.get(fw.key, ""), used=opts.calibrated)
    report["framework"] = {"key": fw.key, "label": fw.label, "source": fw.source,
                           "uneven_stages": fw.uneven_stages, "default_schedule": fw.default_schedule,
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
    mfu = opts.compute_mfu
    cands = evaluate(model, hw, opts.global_batch_tokens, opts.micro_batch, mfu, opts.framework)
    fitting = [c for c in cands if c.fits]
    ties = tie_group(cands, hw, opts.global_batch_tokens)
    tied = ties.members if ties else []
    out: Dict[str, Any] = {"group": group.name, "hardware": hw.summary(), "layouts_evaluated": len(cands),
                           "layouts_fitting": len(fitting), "fits": bool(fitting),
                           "layouts": [row(c, opts.global_batch_tokens, any(c is t for t in tied)) for c in cands],
                           "columns": COLUMNS, "requested_tokens_per_step": opts.global_batch_tokens}
    if opts.layout is not None:
        out["pinned"] = pinned(model, hw, opts, ties)
    if not fitting or ties is None:
        out["overflow"] = overflow_message(opts.model_option, model, hw, cands)
        if cands:
            out["smallest"] = detail(min(cands, key=lambda c: c.memory.total), model, hw, mfu, opts.global_batch_tokens)
        return out
    best = ties.pick
    shown = tied + [c for c in fitting if not any(c is t for t in tied)]
    out["ties"] = dict(tie_summary(ties, hw, model.seq), ratio=tie_ratio(ties.band))
    out["best"] = [detail(c, model, hw, mfu, opts.global_batch_tokens) for c in shown[: opts.top]]
    for b, c in zip(out["best"], shown):
        b["in_tie_group"] = any(c is t for t in tied)
    out["warnings"] = [f"{b['layout']['description']}: {b['layout']['batch_warning']}" for b in out["best"]
                       if b["layout"]["batch_warning"]]
    lines = priced_for_job(cost, group.name)
    # as token_cost: an unpriced instance leaves the job unpriced; an unpriced service is left out (its line says so)
    priced = all("usd_per_hour" in ln for ln in lines if ln["instance_type"])
    out["checkpoint"] = checkpoint(model, group, spec, best.step, best.memory.scheme.checkpoint_weight_bytes,
                                   best.memory.scheme.checkpoint_optimizer_bytes,
                                   sum(val(ln["usd_per_hour"]) for ln in lines if "usd_per_hour" in ln) if priced
                                   else None)
    out["data_path"] = data_path(best.step, spec, opts.bytes_per_token, group)
    out["tokens"] = dict(token_cost(opts.tokens, best.step.tokens_per_s, priced_for_job(cost, group.name)),
                         count=opts.tokens)
    est_tokens_s = best.step.tokens / best.estimate.seconds
    est_hours = opts.tokens / est_tokens_s / 3600
    out["tokens"]["estimate_hours"] = fig(est_hours, "h", "tokens / tokens_per_s / 3600",
                                          tokens=opts.tokens, tokens_per_s=est_tokens_s)
    out["tokens"]["estimate_gpu_hours"] = fig(est_hours * hw.gpus, "GPU-h", "hours * gpus",
                                              hours=est_hours, gpus=hw.gpus)

    if model.is_moe:
        out["expert_parallel"] = expert_parallel(cands, hw)
    return out


def pinned(model: Model, hw: Hardware, opts: PlanOptions, ties: Optional[TieGroup]) -> Dict[str, Any]:
    """--layout: the team's layout as the planner runs it, and where it loses to the tie group's pick."""
    from fmcluster.planner.pinned import evaluate_layout, layout_for, losses

    lay = layout_for(model, hw, opts.layout or {}, opts.global_batch_tokens, opts.micro_batch, opts.framework)
    given_vp = (opts.layout or {}).get("vp")
    c = evaluate_layout(model, hw, lay if given_vp else _open_vp(lay), opts.framework, opts.compute_mfu,
                        opts.recompute)
    out: Dict[str, Any] = {"given": dict(opts.layout or {}), "recompute_given": opts.recompute,
                           **detail(c, model, hw, opts.compute_mfu, opts.global_batch_tokens)}
    if ties is not None and c.fits:
        pick = ties.pick
        slower = c.per_token_s / pick.per_token_s - 1
        out["vs_pick"] = {"pick": pick.layout.key(), "slower": slower,
                          "in_tie_group": any(same_layout(c, t) for t in ties.members),
                          "losses": losses(c, pick)}
    return out


def _open_vp(lay: Any) -> Any:
    from dataclasses import replace

    return replace(lay, vp=0)


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

"""--layout and --recompute: the layout a team already runs, evaluated the way the planner evaluates its own, and
where it loses to the tie group's pick.

`--layout tp=8,pp=16,vp=8,cp=1,dp=64,ep=1` (any order; dp may be left out and follows from the group's GPUs, vp and
cp default to 1, ep to 1, etp to tp): the planner chooses only what is left open (the sharding, the recomputation
policy unless --recompute names one). Every refusal is one line that starts with the option.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Dict, List, Optional

from fmcluster.planner.errors import PlanUsageError
from fmcluster.planner.frameworks import framework
from fmcluster.planner.hardware import Hardware
from fmcluster.planner.layouts import CONTEXT_PARALLEL_MIN_TOKENS, Layout, context_parallel_degrees
from fmcluster.planner.memory import RECOMPUTE
from fmcluster.planner.models import Model
from fmcluster.planner.search import Candidate, best_for

LAYOUT_KEYS = ("tp", "pp", "vp", "cp", "dp", "ep", "etp")


def parse_layout(text: str) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, raw = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in LAYOUT_KEYS:
            raise PlanUsageError(f"--layout: {part!r}: give KEY=N pairs with KEY one of {', '.join(LAYOUT_KEYS)}, e.g. "
                                 "tp=8,pp=16,vp=8,cp=1,dp=64,ep=1")
        if key in out:
            raise PlanUsageError(f"--layout: {key} given twice")
        try:
            value = int(raw.strip())
        except ValueError:
            value = 0
        if value < 1:
            raise PlanUsageError(f"--layout: {key}={raw.strip()!r} must be a whole number of at least 1")
        out[key] = value
    if "tp" not in out or "pp" not in out:
        raise PlanUsageError("--layout: give at least tp and pp, e.g. tp=8,pp=16 (dp follows from the GPUs)")
    return out


def check_recompute(value: Optional[str]) -> Optional[str]:
    if value is not None and value not in RECOMPUTE:
        raise PlanUsageError(f"--recompute: {value!r} is not one of {', '.join(RECOMPUTE)}")
    return value


def layout_for(model: Model, hw: Hardware, given: Dict[str, int], global_batch_tokens: float, micro_batch: int,
               framework_key: str) -> Layout:
    """The pinned layout on this group, or a one-line refusal naming what does not hold."""
    tp, pp, cp, vp, ep = given["tp"], given["pp"], given.get("cp", 1), given.get("vp", 1), given.get("ep", 1)
    if tp > hw.domain:
        raise PlanUsageError(f"--layout: tp={tp} spans more than one {hw.domain}-GPU NVLink domain")
    if model.heads % tp:
        raise PlanUsageError(f"--layout: tp={tp} does not divide {model.heads} attention heads")
    if cp > 1 and cp not in context_parallel_degrees(model):
        raise PlanUsageError(f"--layout: cp={cp} does not split {model.seq:,} tokens into {2 * cp} equal chunks with "
                             f"at least {CONTEXT_PARALLEL_MIN_TOKENS:,} tokens per rank (ring attention's load-balanced "
                             "causal split)")
    rest = hw.gpus // (tp * cp * pp) if hw.gpus % (tp * cp * pp) == 0 else 0
    dp = given.get("dp", rest)
    if dp < 1 or tp * cp * pp * dp != hw.gpus:
        raise PlanUsageError(f"--layout: tp x cp x pp x dp = {tp * cp * pp * max(dp, 1)}, the group {hw.group} has "
                             f"{hw.gpus} GPUs")
    if pp > model.layers:
        raise PlanUsageError(f"--layout: pp={pp} is more stages than the model's {model.layers} layers")
    if pp == 1 and vp > 1:
        raise PlanUsageError(f"--layout: vp={vp} needs pipeline parallelism (pp > 1)")
    fw = framework(framework_key)
    if vp > 1 and not fw.interleaving:
        raise PlanUsageError(f"--layout: vp={vp}: {fw.key} runs plain 1F1B only (no interleaved virtual stages)")
    if model.layers % (pp * vp) and not fw.uneven_stages:
        raise PlanUsageError(f"--layout: {model.layers} layers do not divide by pp x vp = {pp * vp}, and {fw.key} does "
                             "not split stages unevenly")
    etp = given.get("etp", 0)
    if ep > 1 and not model.is_moe:
        raise PlanUsageError(f"--layout: ep={ep} needs a mixture of experts; {model.name} has none")
    if model.is_moe and (model.experts % ep or (cp * dp * (tp // (etp or tp))) % ep):
        raise PlanUsageError(f"--layout: ep={ep} must divide the {model.experts} experts and the ranks that hold a "
                             f"stage's experts ({cp * dp * (tp // (etp or tp))})")
    sequences = max(1, math.ceil(global_batch_tokens / model.seq))
    microbatches = max(1, math.ceil(math.ceil(sequences / dp) / micro_batch))
    if vp > 1 and microbatches < pp:
        raise PlanUsageError(f"--layout: vp={vp} (interleaved) needs at least pp = {pp} micro-batches per step, the batch "
                             f"gives {microbatches}")
    return Layout(tp=tp, pp=pp, dp=dp, ep=ep, micro_batch=micro_batch, microbatches=microbatches, seq=model.seq,
                  cp=cp, vp=vp, etp=etp if etp != tp else 0)


def evaluate_layout(model: Model, hw: Hardware, layout: Layout, framework_key: str, mfu: Optional[float],
                    recompute: Optional[str] = None, sharding: Optional[str] = None) -> Candidate:
    """`layout.vp` 0 lets the planner choose the virtual stages; recompute and sharding None likewise."""
    fw = framework(framework_key)
    vps = [layout.vp] if layout.vp else None
    policies = (recompute,) if recompute else RECOMPUTE
    shardings = [fw.sharding(sharding)] if sharding else None
    return best_for(model, hw, replace(layout, vp=layout.vp or 1), fw, mfu, vps, policies, shardings)


def losses(pinned: Candidate, pick: Candidate) -> List[Dict[str, Any]]:
    """Where the pinned layout spends more time per token than the pick, largest first (shares of the pick's time)."""
    def parts(c: Candidate) -> Dict[str, float]:
        e = c.estimate
        out = {"compute": e.compute_s, "pipeline bubble": e.bubble_s}
        out.update({f"exposed {k}": v for k, v in e.exposed.items()})
        out["overlap left (bound over the serial estimate)"] = e.seconds - e.compute_s - e.bubble_s - sum(
            e.exposed.values())
        return {k: v / c.step.tokens for k, v in out.items()}

    a, b = parts(pinned), parts(pick)
    base = pick.per_token_s or 1.0
    diffs = {k: a.get(k, 0.0) - b.get(k, 0.0) for k in sorted(set(a) | set(b))}
    kept = sorted((k for k, d in diffs.items() if abs(d) / base >= 0.005), key=lambda k: -diffs[k])
    return [{"term": k, "seconds_per_token": diffs[k], "share_of_pick": diffs[k] / base} for k in kept]

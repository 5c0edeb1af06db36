"""Which layouts fit, which is fastest, and why nothing fits when nothing does."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional, Sequence

from fmcluster.planner.efficiency import Estimate, estimate
from fmcluster.planner.figures import GIB, human_count
from fmcluster.planner.frameworks import DEFAULT_FRAMEWORK, Framework, Sharding, framework, sharding_label
from fmcluster.planner.hardware import Hardware
from fmcluster.planner.layouts import Layout, enumerate_layouts, uneven, virtual_stages
from fmcluster.planner.memory import RECOMPUTE, Memory, memory
from fmcluster.planner.models import Model
from fmcluster.planner.steptime import Step, step

TERM_LABEL = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer state", "activations": "activations",
              "gathered": "gathered weights"}


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    memory: Memory
    step: Step
    fits: bool
    estimate: Estimate
    framework: str = DEFAULT_FRAMEWORK
    uneven: bool = False  # layers do not divide by pp x vp: needs the framework's uneven-stage option

    @property
    def per_token_s(self) -> float:
        return _per_token(self.estimate.seconds, self)


def evaluate(model: Model, hw: Hardware, global_batch_tokens: float, micro_batch: int, mfu: Optional[float] = None,
             framework_key: str = DEFAULT_FRAMEWORK) -> List[Candidate]:
    """One candidate per layout: the (sharding, recomputation, virtual stages) that fits with the lowest estimate per
    token, else the smallest footprint. Sorted fitting first, then layouts that keep the batch, then by the estimate
    per token (the bound, then the serial sum, break ties: of two equally fast layouts, the one moving less).
    `mfu` None runs the calibrated rates (rates.py); a fraction replaces them."""
    fw = framework(framework_key)
    out = [best_for(model, hw, base, fw, mfu)
           for base in enumerate_layouts(model, hw, global_batch_tokens, micro_batch, uneven_ok=bool(fw.uneven_stages))]
    out.sort(key=lambda x: (not x.fits, grows_batch(x.layout, global_batch_tokens),
                            _per_token(x.estimate.seconds, x) if x.fits else x.memory.total,
                            _per_token(x.step.bound_s, x), _per_token(x.step.serial_s, x)))
    return out


def best_for(model: Model, hw: Hardware, base: Layout, fw: Framework, mfu: Optional[float],
             vps: Optional[Sequence[int]] = None, policies: Sequence[str] = RECOMPUTE,
             shardings: Optional[Sequence[Sharding]] = None) -> Candidate:
    """The fastest (virtual stages, sharding, recomputation) of one layout that fits; else its smallest footprint.
    Policies are tried in the order given: none, then selective, then full, each slower and smaller than the last."""
    best: Optional[Candidate] = None
    smallest: Optional[tuple] = None
    options = virtual_stages(model, base, bool(fw.uneven_stages)) if fw.interleaving else [1]
    for layout in (replace(base, vp=v) for v in (vps or options)):
        for sharding in shardings or [x for x in fw.shardings if x.allowed(layout.pp)]:
            if shardings is None and sharding is not fw.shardings[0] and layout.dense_dp == 1:
                continue  # nothing to shard over
            mems = {r: memory(model, layout, sharding, r) for r in policies}
            low = min(mems.values(), key=lambda m: m.total)
            if smallest is None or low.total < smallest[1].total:
                smallest = (layout, low)
            policy = next((r for r in policies if mems[r].total <= hw.usable_hbm_bytes), None)
            if policy is None:
                continue
            cand = candidate(model, hw, layout, sharding, mems[policy], mfu, fw.key, True)
            if best is None or _rank(cand) < _rank(best):
                best = cand
    if best is not None:
        return best
    assert smallest is not None
    layout, mem = smallest
    return candidate(model, hw, layout, mem.scheme, mem, mfu, fw.key, False)


def candidate(model: Model, hw: Hardware, layout: Layout, sharding: Sharding, mem: Memory, mfu: Optional[float],
              fw_key: str, fits: bool) -> Candidate:
    st = step(model, hw, layout, sharding, mem.recompute, mfu, fw_key)
    return Candidate(layout, mem, st, fits, estimate(model, hw, layout, sharding, fw_key, st), fw_key,
                     uneven(model, layout))


def _per_token(seconds: float, c: Candidate) -> float:
    """Seconds per token: layouts round the batch to their data-parallel width differently, so step times alone do
    not compare."""
    return seconds / c.step.tokens if c.step.tokens else float("inf")


def _rank(c: Candidate) -> tuple:
    return (_per_token(c.estimate.seconds, c), _per_token(c.step.bound_s, c), _per_token(c.step.serial_s, c),
            c.memory.total)


BATCH_GROWTH_ALLOWED = 1.25  # a step up to 25% over the requested batch still counts as that batch


def grows_batch(layout: Layout, requested: float) -> bool:
    """Every data-parallel rank runs at least one micro-batch: a wide layout can run a much larger batch than asked
    for, a different training run; such layouts rank after those that keep the batch."""
    return layout.tokens_per_step > requested * BATCH_GROWTH_ALLOWED


def batch_warning(layout: Layout, requested: float) -> str:
    """Why a layout's step carries more (or other) tokens than requested; '' when it carries the request."""
    tokens = layout.tokens_per_step
    if tokens == requested:
        return ""
    ratio = tokens / requested
    why = (f"{layout.dp} data-parallel ranks x {layout.microbatches} micro-batch(es) x {layout.micro_batch} "
           f"sequence(s) x {layout.seq} tokens")
    return (f"runs {human_int(tokens)} tokens per step, {ratio:.2f}x the {human_int(requested)} requested ({why})"
            + ("; ranked after layouts that keep the batch" if grows_batch(layout, requested) else ""))


def human_int(n: float) -> str:
    return f"{n:,.0f}"


def describe(c: Candidate) -> str:
    lay, mem = c.layout, c.memory
    parts = [f"tp={lay.tp}"] + ([f"cp={lay.cp}"] if lay.cp > 1 else []) + [f"pp={lay.pp}"]
    parts += [f"vp={lay.vp} (interleaved)"] if lay.vp > 1 else []
    parts += [f"dp={lay.dp}"]
    if lay.ep > 1:
        parts += [f"ep={lay.ep}" + (f" (experts over tensor ranks, etp={lay.expert_tp})" if lay.expert_tp != lay.tp
                                    else "")]
    recompute = {"none": "no recomputation", "selective": "selective recomputation",
                 "full": "full recomputation"}[mem.recompute]
    stages = f", uneven stages ({framework(c.framework).uneven_stages})" if c.uneven else ""
    return f"{', '.join(parts)}, {sharding_label(mem.scheme, lay.dense_dp)}, {recompute}{stages}"


def overflow_message(option: str, model: Model, hw: Hardware, candidates: List[Candidate]) -> str:
    """Why nothing fits: the smallest footprint, its largest term, and by how much HBM overflows."""
    usable = hw.usable_hbm_bytes
    head = (f"{option}: {model.name} ({human_count(model.params)} parameters) does not fit any layout of group "
            f"{hw.group} ({hw.nodes} x {hw.instance_type}, {hw.gpus} GPUs of {hw.hbm_bytes / GIB:.0f} GiB, "
            f"{usable / GIB:.0f} GiB usable)")
    if not candidates:
        return f"{head}: no layout divides {hw.gpus} GPUs for {model.heads} attention heads"
    smallest = min(candidates, key=lambda x: x.memory.total)
    mem = smallest.memory
    terms = sorted(((k, v) for k, v in mem.terms().items() if v > 0), key=lambda kv: -kv[1])
    name, size = terms[0]
    alone = f"; {TERM_LABEL[name]} alone is {size / GIB:.1f} GiB, {(size - usable) / GIB:.1f} GiB over" if size > usable \
        else ""
    parts = ", ".join(f"{TERM_LABEL[k]} {v / GIB:.1f}" for k, v in terms)
    return (f"{head}: the smallest footprint ({describe(smallest)}) needs {mem.total / GIB:.1f} GiB per GPU "
            f"({parts} GiB), {(mem.total - usable) / GIB:.1f} GiB over HBM; the largest term is "
            f"{TERM_LABEL[name]}{alone}. Add nodes or pick a type with more HBM.")

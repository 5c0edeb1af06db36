"""The published runs the planner is calibrated against, and how it does on each (docs/planning.md, Calibration).

data/calibration.json holds each run as published: model, hardware, framework, precision, layout, batch, the
throughput in the unit it was published in, memory where published, and the source with its table or line. Here a
run is read into the planner's terms and evaluated two ways: its published layout (pinned, the planner choosing only
what the source leaves open) against the published throughput, and a full search, whose tie group should hold the
published layout. Loaded on first use; nothing is computed at import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.planner.errors import PlanUsageError
from fmcluster.planner.hardware import Hardware, of_type
from fmcluster.planner.layouts import Layout
from fmcluster.planner.models import DATA, Model, build, preset, with_seq
from fmcluster.planner.search import Candidate, evaluate
from fmcluster.planner.steptime import flops_per_token
from fmcluster.planner.ties import TieGroup, same_layout, tie_group

GIB = 2**30


@dataclass(frozen=True)
class Run:
    id: str
    model: Model
    hw: Hardware
    framework: str
    layout: Layout  # vp 0: not published
    sharding: Optional[str]
    recompute: Optional[str]
    measured: float  # tokens per second per GPU
    published: str  # the figure as published, with its unit
    memory_gib: Optional[float]
    source: str

    @property
    def global_batch_tokens(self) -> float:
        return float(self.layout.tokens_per_step)


@lru_cache(maxsize=1)
def _data() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((DATA / "calibration.json").read_text(encoding="utf-8"))
    return data


def megatron_lm_flops_per_token(model: Model) -> float:
    """Megatron-LM's count (megatron/training/training.py, num_floating_point_operations, Megatron Core r0.8.0):
    12 L h^2 (2 + s/h + ffn/h) + 6 V h per token for a plain-MLP GPT; its attention counts the whole s x s square."""
    L, h, s, v = model.layers, model.hidden, model.seq, model.vocab
    return 12.0 * L * h * h * (2 + s / h + (model.ffn or 4 * h) / h) + 6.0 * v * h


def tokens_per_s_per_gpu(published: Dict[str, Any], model: Model, gpus: int) -> float:
    unit, value = published["unit"], float(published["value"])
    if unit == "tokens/s/GPU":
        return value
    if unit == "tokens/s":
        return value / gpus
    if unit == "model TFLOP/s per GPU":  # 6N plus causal attention, the count NVIDIA's tables use
        return value * 1e12 / flops_per_token(model, "none")
    if unit == "Megatron-LM TFLOP/s per GPU":
        return value * 1e12 / megatron_lm_flops_per_token(model)
    if unit == "GPU-hours":
        return float(published["tokens"]) / (value * 3600)
    raise ValueError(f"calibration.json: unknown unit {unit!r}")


def _model(name: str, seq: int) -> Model:
    raw = _data()["models"].get(name)
    model = build(dict(raw, name=name), "calibration.json") if raw else preset(name)
    if model is None:
        raise ValueError(f"calibration.json: no model {name!r}")
    return with_seq(model, seq)


def _hardware(r: Dict[str, Any]) -> Hardware:
    from fmcluster.catalog import all_types

    t = all_types()[r["instance_type"]]
    hw = of_type(t, r["id"], r["instance_type"], r["gpus"] // t.gpus, r["precision"], True)
    over = _data()["hardware"].get(r.get("hardware", ""), {})
    if "hbm_gib" in over:
        hw = replace(hw, hbm_bytes=over["hbm_gib"] * GIB)
    if "nvlink_gb_s" in over:
        hw = replace(hw, nvlink_bytes_s=over["nvlink_gb_s"] * 1e9)
    if "network_gb_s_per_gpu" in over:
        hw = replace(hw, internode_bytes_s_per_gpu=over["network_gb_s_per_gpu"] * 1e9)
    return hw


def _run(r: Dict[str, Any]) -> Run:
    model = _model(r["model"], r["seq"])
    lay = r["layout"]
    dp, mbs = lay["dp"], r["micro_batch"]
    microbatches = r["global_batch"] // (dp * mbs)
    layout = Layout(tp=lay["tp"], pp=lay["pp"], dp=dp, ep=lay["ep"], micro_batch=mbs, microbatches=microbatches,
                    seq=r["seq"], cp=lay["cp"], vp=lay["vp"] or 0)
    pub = r["published"]
    return Run(r["id"], model, _hardware(r), r["framework"], layout, r.get("sharding"), r.get("recompute"),
               tokens_per_s_per_gpu(pub, model, r["gpus"]), f"{pub['value']:,} {pub['unit']}", r.get("memory_gib"),
               f"{r['source']['url']} ({r['source']['where']})")


@lru_cache(maxsize=1)
def runs() -> Tuple[Run, ...]:
    return tuple(_run(r) for r in _data()["runs"])


def excluded() -> List[Dict[str, str]]:
    return list(_data()["excluded"])


@dataclass(frozen=True)
class Result:
    run: Run
    published: Candidate  # the published layout as the planner runs it
    ties: Optional[TieGroup]
    ranked: List[Candidate]

    @property
    def predicted(self) -> float:
        c = self.published
        return c.step.tokens / c.estimate.seconds / self.run.hw.gpus

    @property
    def error(self) -> float:
        """Predicted over published throughput, less one: +0.10 is 10% optimistic."""
        return self.predicted / self.run.measured - 1

    @property
    def in_ties(self) -> bool:
        return self.ties is not None and any(same_layout(self.published, c) for c in self.ties.members)

    @property
    def pick_ratio(self) -> float:
        """The pick's estimated throughput over the published run's, on the same hardware and model."""
        if self.ties is None:
            return 0.0
        p = self.ties.pick
        return p.step.tokens / p.estimate.seconds / self.run.hw.gpus / self.run.measured

    def one_step(self) -> str:
        """Why the published layout is one step from the tie group, or '' when it is not."""
        if self.ties is None:
            return ""
        pub = self.published.layout
        for c in self.ties.members:
            lay = c.layout
            diffs = [(k, getattr(pub, k), getattr(lay, k)) for k in ("tp", "cp", "pp", "ep")
                     if getattr(pub, k) != getattr(lay, k)]
            if len(diffs) == 1 and max(diffs[0][1], diffs[0][2]) == 2 * min(diffs[0][1], diffs[0][2]):
                k, a, b = diffs[0]
                return (f"the published {k}={a} is one step from {lay.key()} in the tie group ({k}={b}); the published "
                        f"layout is {self.published.per_token_s / self.ties.fastest.per_token_s - 1:.0%} slower than "
                        f"the fastest by the estimate")
        return ""


def pinned(run: Run) -> Candidate:
    """The published layout, the planner choosing what the source leaves open (vp, sharding, recomputation)."""
    from fmcluster.planner.pinned import evaluate_layout

    lay = run.layout
    return evaluate_layout(run.model, run.hw, lay, run.framework, None, run.recompute, run.sharding)


def evaluate_run(run: Run) -> Result:
    ranked = evaluate(run.model, run.hw, run.global_batch_tokens, run.layout.micro_batch, None, run.framework)
    return Result(run, pinned(run), tie_group(ranked, run.hw, run.global_batch_tokens), ranked)


def results() -> List[Result]:
    try:
        return [evaluate_run(r) for r in runs()]
    except PlanUsageError as e:  # a table entry the planner refuses is a table bug, said as one
        raise ValueError(f"calibration.json: {e}") from None

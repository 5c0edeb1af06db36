"""Pass, warn or fail per message size: measured busbw against the planner's bound and the published results.

A size is judged against the published result where one exists for this instance type, collective and node count
(every size it covers), and against the planner's bound from `plan_min_bytes` up: the bound ignores latency, so a
small message cannot approach it and is shown (`info`) but not judged by it. A ratio at or above `warn_below` passes,
at or above `fail_below` warns, below fails; a size with wrong results (#wrong > 0) fails whatever its bandwidth. The
run's verdict is its worst size; a run that failed, stopped before its `# Avg bus bandwidth` line, reported out of
bounds values or had no size judged fails: an acceptance that could not run is not a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from fmcluster.acceptance import references
from fmcluster.acceptance.bound import Bound
from fmcluster.acceptance.nccl_output import Row, Run

PASS, WARN, FAIL, INFO = "pass", "warn", "fail", "info"
_RANK = {INFO: 0, PASS: 1, WARN: 2, FAIL: 3}


@dataclass(frozen=True)
class Thresholds:
    warn_below: float = 0.8
    fail_below: float = 0.6
    plan_min_bytes: int = 2**30

    def grade(self, ratio: float) -> str:
        return PASS if ratio >= self.warn_below else WARN if ratio >= self.fail_below else FAIL


@dataclass
class SizeVerdict:
    size: int
    busbw: float
    plan: Optional[float]
    published: Optional[float]
    verdict: str
    reasons: List[str]


@dataclass
class RunVerdict:
    collective: str
    nodes: int
    ranks: int
    instance_type: Optional[str]
    sizes: List[SizeVerdict]
    verdict: str
    problems: List[str] = field(default_factory=list)
    bound: Optional[Bound] = None
    published_source: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {"collective": self.collective, "nodes": self.nodes, "ranks": self.ranks,
                "instance_type": self.instance_type, "verdict": self.verdict, "problems": self.problems,
                "plan_busbw_gbs": round(self.bound.busbw_gbs, 2) if self.bound else None,
                "plan_formula": self.bound.formula if self.bound else None,
                "published_source": self.published_source,
                "sizes": [{"bytes": s.size, "busbw_gbs": s.busbw, "plan_gbs": _r(s.plan), "published_gbs": _r(s.published),
                           "verdict": s.verdict, "reasons": s.reasons} for s in self.sizes]}


def _r(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(x, 2)


def worst(verdicts: List[str]) -> str:
    return max(verdicts, key=_RANK.__getitem__) if verdicts else INFO


def _judge_size(row: Row, bound: Optional[Bound], ref: Optional[references.Reference], t: Thresholds) -> SizeVerdict:
    reasons: List[str] = []
    grades: List[str] = []
    published = references.at(ref, row.size) if ref else None
    plan = bound.busbw_gbs if bound else None
    if row.wrong:
        grades.append(FAIL)
        reasons.append(f"{row.wrong} wrong result(s): data corrupted in flight")
    if published:
        ratio = row.busbw / published
        grades.append(t.grade(ratio))
        reasons.append(f"{ratio:.0%} of published")
    if plan and row.size >= t.plan_min_bytes:
        ratio = row.busbw / plan
        grades.append(t.grade(ratio))
        reasons.append(f"{ratio:.0%} of plan")
    elif plan:
        reasons.append(f"{row.busbw / plan:.0%} of plan (latency-bound size, not judged)")
    return SizeVerdict(row.size, row.busbw, plan, published, worst(grades), reasons)


def judge(run: Run, *, nodes: int, ranks: int, instance_type: Optional[str], bound: Optional[Bound],
          thresholds: Thresholds) -> RunVerdict:
    collective = run.collective or "?"
    ref = references.reference(instance_type, collective, nodes) if instance_type else None
    sizes = [_judge_size(r, bound, ref, thresholds) for r in run.rows]
    problems: List[str] = []
    if run.failures:
        problems.append("the run failed: " + run.failures[0])
    if not run.complete and not run.failures:
        last = f"; last size {run.rows[-1].size} B" if run.rows else ""
        problems.append(f"the run is incomplete (no '# Avg bus bandwidth' line{last}): it was cut off or hung")
    if run.out_of_bounds:
        problems.append(f"{run.out_of_bounds} out of bounds value(s)")
    if not problems and not any(s.verdict != INFO for s in sizes):
        problems.append("no message size could be judged (none large enough for the plan, none in a published range)")
    verdict = FAIL if problems else worst([s.verdict for s in sizes])
    return RunVerdict(collective, nodes, ranks, instance_type, sizes, verdict, problems, bound,
                      ref.source if ref else None)

"""Pass, warn or fail: an nccl-tests run against the fabric model and the published results.

Per message size: against the published result where one exists for this instance type, collective and node count
(every size it covers); a size with wrong results (#wrong > 0) fails; a size above the physical limit fails as
suspect (no fabric of this kind can move that much: the log does not measure what it says, e.g. fewer ranks or
another instance type). Per run: its peak busbw at `model_min_bytes` or more (smaller messages are latency-bound
and never reach the bandwidth the model gives) against the model's expected busbw (fabric_model.py). A share at or
above `warn_below` passes, at or above `fail_below` warns, below fails. The run's verdict is the worst of these; a
run that failed, timed out, stopped before its `# Avg bus bandwidth` line, reported out of bounds values, printed
size lines that could not be read, or had nothing judged fails: an acceptance that could not run is not a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.acceptance import references
from fmcluster.acceptance.bound import Bound
from fmcluster.acceptance.fabric_model import Expectation
from fmcluster.acceptance.nccl_output import Row, Run

PASS, WARN, FAIL, INFO = "pass", "warn", "fail", "info"
_RANK = {INFO: 0, PASS: 1, WARN: 2, FAIL: 3}


@dataclass(frozen=True)
class Thresholds:
    warn_below: float = 0.8
    fail_below: float = 0.6
    model_min_bytes: int = 2**30

    def grade(self, ratio: float) -> str:
        return PASS if ratio >= self.warn_below else WARN if ratio >= self.fail_below else FAIL


@dataclass
class SizeVerdict:
    size: int
    busbw: float
    model: Optional[float]
    published: Optional[float]
    verdict: str
    reasons: List[str]
    suspect: bool = False


@dataclass
class RunVerdict:
    collective: str
    nodes: int
    ranks: int
    hosts: List[str]
    instance_type: Optional[str]
    sizes: List[SizeVerdict]
    verdict: str
    problems: List[str] = field(default_factory=list)
    model: Optional[Expectation] = None
    model_verdict: str = INFO
    peak: Optional[Tuple[int, float]] = None  # (bytes, busbw) the model judged
    plan: Optional[Bound] = None
    published_source: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        m = self.model
        return {"collective": self.collective, "nodes": self.nodes, "ranks": self.ranks, "hosts": self.hosts,
                "instance_type": self.instance_type, "verdict": self.verdict, "problems": self.problems,
                "model": None if m is None else {
                    "expected_busbw_gbs": _r(m.expected_gbs), "physical_limit_gbs": _r(m.limit_gbs),
                    "nvlink_path_gbs": _r(m.nvlink_gbs), "efa_path_gbs": _r(m.efa_gbs), "bound_by": m.bound_by,
                    "nvlink_domains": m.domains, "ranks_per_domain": m.ranks_per_domain, "formula": m.formula,
                    "peak_bytes": self.peak[0] if self.peak else None,
                    "peak_busbw_gbs": self.peak[1] if self.peak else None, "verdict": self.model_verdict},
                "plan_busbw_gbs": _r(self.plan.busbw_gbs) if self.plan else None,
                "published_source": self.published_source,
                "sizes": [{"bytes": s.size, "busbw_gbs": s.busbw, "model_gbs": _r(s.model),
                           "published_gbs": _r(s.published), "verdict": s.verdict, "suspect": s.suspect,
                           "reasons": s.reasons} for s in self.sizes]}


def _r(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(x, 2)


def worst(verdicts: List[str]) -> str:
    return max(verdicts, key=_RANK.__getitem__) if verdicts else INFO


def _judge_size(row: Row, model: Optional[Expectation], ref: Optional[references.Reference],
                t: Thresholds) -> SizeVerdict:
    reasons: List[str] = []
    grades: List[str] = []
    published = references.at(ref, row.size) if ref else None
    expected = model.expected_gbs if model and row.size >= t.model_min_bytes else None
    suspect = bool(model and row.busbw > model.limit_gbs)
    if row.wrong:
        grades.append(FAIL)
        reasons.append(f"{row.wrong} wrong result(s): data corrupted in flight")
    if suspect and model:
        grades.append(FAIL)
        reasons.append(f"suspect: above the physical limit of {model.limit_gbs:.0f} GB/s")
    if published:
        ratio = row.busbw / published
        grades.append(t.grade(ratio))
        reasons.append(f"{ratio:.0%} of published")
    if expected:
        reasons.append(f"{row.busbw / expected:.0%} of model")
    return SizeVerdict(row.size, row.busbw, expected, published, worst(grades), reasons, suspect)


def judge(run: Run, *, hosts: int, ranks: int, instance_type: Optional[str], model: Optional[Expectation],
          thresholds: Thresholds, plan: Optional[Bound] = None) -> RunVerdict:
    collective = run.collective or "?"
    ref = references.reference(instance_type, collective, hosts) if instance_type else None
    sizes = [_judge_size(r, model, ref, thresholds) for r in run.rows]
    problems: List[str] = []
    if run.failures:
        problems.append("the run failed: " + run.failures[0])
    if not run.complete and not run.failures:
        last = f"; last size {run.rows[-1].size} B" if run.rows else ""
        problems.append(f"the run is incomplete (no '# Avg bus bandwidth' line{last}): it was cut off or hung")
    if run.out_of_bounds:
        problems.append(f"{run.out_of_bounds} out of bounds value(s)")
    if run.unread:
        problems.append(f"{len(run.unread)} size line(s) could not be read, first {run.unread[0]}")
    suspect = [s for s in sizes if s.suspect]
    if suspect and model:
        problems.append(f"{len(suspect)} size(s) above the physical limit of {model.limit_gbs:.0f} GB/s "
                        f"(up to {max(s.busbw for s in suspect):.0f} GB/s): suspect, the log does not measure this "
                        f"fabric as it says (ranks, hosts, instance type or a changed busbw)")
    model_verdict, peak = INFO, None
    large = [s for s in sizes if s.size >= thresholds.model_min_bytes]
    if model and large:
        best = max(large, key=lambda s: s.busbw)
        peak = (best.size, best.busbw)
        model_verdict = thresholds.grade(best.busbw / model.expected_gbs)
    if not problems and model_verdict == INFO and not any(s.verdict != INFO for s in sizes):
        problems.append("no message size could be judged (none of 1 GiB or more for the model, none in a published "
                        "range)")
    verdict = FAIL if problems else worst([s.verdict for s in sizes] + [model_verdict])
    return RunVerdict(collective, hosts, ranks, run.hosts, instance_type, sizes, verdict, problems, model,
                      model_verdict, peak, plan, ref.source if ref else None)

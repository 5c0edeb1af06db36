"""Pass, warn or fail: a deployment's load test (`vllm bench serve` at the spec's request rate) against its SLOs and
the plan (docs/serving.md, "Load test and acceptance").

- Every request must succeed: a failed request fails the run, as does a run that completed none.
- The rate served: requests per second over the offered rate (job serve's marker, else the spec's): at or above
  `warn_below` passes, at or above `fail_below` warns, below fails (an open-loop test falls behind only when the
  deployment cannot keep up).
- Mean TTFT and TPOT against the SLOs: within passes; within the SLO over `warn_below` (25% over, by default) warns;
  beyond fails. P99s are reported, not judged (the SLOs are means per request, as the plan sizes them).
- Against the plan: the plan's TTFT and TPOT at the offered rate with the replicas it picks; a figure worse than the
  plan's by more than the calibration band warns (the deployment runs slower than sized: fewer replicas up, another
  engine version, a slower source), and the verdict says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from fmcluster.acceptance.serve_output import BenchResult

PASS, WARN, FAIL = "pass", "warn", "fail"
_RANK = {PASS: 0, WARN: 1, FAIL: 2}


def worst(verdicts: List[str]) -> str:
    return max(verdicts or [PASS], key=lambda v: _RANK[v])


@dataclass
class Check:
    what: str
    measured: Optional[float]
    reference: Optional[float]
    verdict: str
    why: str


@dataclass
class ServeVerdict:
    deployment: str
    verdict: str
    checks: List[Check] = field(default_factory=list)
    percentiles: Dict[str, float] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {"deployment": self.deployment, "verdict": self.verdict, "percentiles": self.percentiles,
                "checks": [c.__dict__ for c in self.checks]}


def judge(run: BenchResult, *, deployment: str, rate: float, ttft_ms: float, tpot_ms: float,
          plan_ttft_ms: Optional[float], plan_tpot_ms: Optional[float], band: float, warn_below: float = 0.8,
          fail_below: float = 0.6) -> ServeVerdict:
    checks: List[Check] = []
    completed, failed = run.get("completed") or 0, run.get("failed") or 0
    if not completed:
        checks.append(Check("requests", 0, None, FAIL, "no request completed"))
    if failed:
        checks.append(Check("failed requests", failed, 0, FAIL, f"{failed:.0f} of {completed + failed:.0f} requests "
                                                                "failed"))
    served = run.get("request_throughput")
    if served is not None and rate > 0:
        share = served / rate
        v = PASS if share >= warn_below else WARN if share >= fail_below else FAIL
        checks.append(Check("request rate (req/s)", served, rate, v, f"{share:.0%} of the offered {rate:g} req/s"))
    for name, key, slo, planned in (("TTFT", "mean_ttft_ms", ttft_ms, plan_ttft_ms),
                                    ("TPOT", "mean_tpot_ms", tpot_ms, plan_tpot_ms)):
        measured = run.get(key)
        if measured is None:
            checks.append(Check(f"mean {name} (ms)", None, slo, FAIL, f"the output has no mean {name}"))
            continue
        if measured <= slo:
            v, why = PASS, f"within the {slo:g} ms SLO"
        elif measured <= slo / warn_below:
            v, why = WARN, f"{measured / slo - 1:.0%} over the {slo:g} ms SLO"
        else:
            v, why = FAIL, f"{measured / slo - 1:.0%} over the {slo:g} ms SLO"
        checks.append(Check(f"mean {name} (ms)", measured, slo, v, why))
        if planned:
            ratio = measured / planned
            pv = WARN if ratio > 1 + band else PASS
            checks.append(Check(f"mean {name} against the plan (ms)", measured, planned, pv,
                                f"{ratio:.2f}x the plan's {planned:.1f} ms" +
                                (f": beyond the calibration's ±{band:.0%}" if pv == WARN else "")))
    pct = {k: v for k, v in run.values.items() if k.startswith("p") and k.endswith("_ms")}
    return ServeVerdict(deployment, worst([c.verdict for c in checks]), checks, pct)


def render(v: ServeVerdict) -> str:
    lines = [f"serving {v.deployment}: {v.verdict.upper()}",
             f"  {'check':<38} {'measured':>10} {'reference':>10}  verdict  why"]
    for c in v.checks:
        m = "-" if c.measured is None else f"{c.measured:,.2f}"
        r = "-" if c.reference is None else f"{c.reference:,.2f}"
        lines.append(f"  {c.what:<38} {m:>10} {r:>10}  {c.verdict:<7}  {c.why}")
    if v.percentiles:
        shown = ", ".join(f"{k[:-3]} {val:,.1f} ms" for k, val in sorted(v.percentiles.items()))
        lines.append(f"  percentiles (not judged): {shown}")
    return "\n".join(lines)

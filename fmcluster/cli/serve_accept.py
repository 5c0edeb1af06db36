"""`fmcluster accept` of a serving load test: each run of `vllm bench serve` in the log against its deployment's SLOs
and the plan's figures at the offered rate (fmcluster/acceptance/serve_verdict.py; docs/serving.md). Exit 0: every run
passed (or warned, without --strict); 1: a run failed; 2: bad input."""

from __future__ import annotations

import json
from typing import Any, List, Optional

from fmcluster.cli.errors import EXIT_FAILED, EXIT_OK, UsageError


def _fraction(raw: str, name: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"--{name}: {raw!r} is not a number") from None
    if not 0 < value <= 1:
        raise UsageError(f"--{name}: a share of the reference, greater than 0 and at most 1")
    return value


def _plan_figures(spec: Any, d: Any) -> tuple:
    """The plan's TTFT and TPOT (ms) at the deployment's rate with the layout it picks (None where none meets the
    SLOs), and the calibration band."""
    from fmcluster.planner.serving.calibration import ERROR_BAND
    from fmcluster.planner.serving.cli import _from_deployment
    from fmcluster.planner.serving.plan import plan

    report = plan(_from_deployment(d, spec))
    rows = report.get(d.mode)  # the deployment's own mode, whichever the plan would choose
    if not rows:
        return None, None, ERROR_BAND
    return rows[0]["ttft_ms"], rows[0]["tpot_ms"], ERROR_BAND


def run(args: Any, text: str) -> int:
    from fmcluster.acceptance import serve_output, serve_verdict
    from fmcluster.registry import load_spec

    if args.spec is None:
        raise UsageError("--spec: a serving load test is judged against the spec's SLOs and the plan; give the spec")
    warn_below = _fraction(args.warn_below, "warn-below")
    fail_below = _fraction(args.fail_below, "fail-below")
    if fail_below > warn_below:
        raise UsageError("--fail-below: must not exceed --warn-below")
    spec = load_spec(args.spec)
    if spec.serving is None:
        raise UsageError(f"--spec: {args.spec} has no serving section")
    try:
        runs = serve_output.parse(text)
    except serve_output.OutputError as e:
        raise UsageError(f"LOG: {args.log}: {e}") from None
    models = {d.name: d for d in spec.serving.models}
    results: List[serve_verdict.ServeVerdict] = []
    for i, run in enumerate(runs, 1):
        name: Optional[str] = args.model or run.deployment
        if name is None and len(models) == 1:
            name = next(iter(models))
        if name not in models:
            raise UsageError(f"--model: run {i} of {args.log} does not name its deployment; give one of "
                             f"{', '.join(models)}" if name is None else
                             f"--model: {name!r} is not a serving model of {args.spec} ({', '.join(models)})")
        d = models[name]
        rate = float(run.marker.get("rate", d.workload.requests_per_second))
        plan_ttft, plan_tpot, band = _plan_figures(spec, d)
        results.append(serve_verdict.judge(run, deployment=name, rate=rate, ttft_ms=d.slo.ttft_ms,
                                           tpot_ms=d.slo.tpot_ms, plan_ttft_ms=plan_ttft, plan_tpot_ms=plan_tpot,
                                           band=band, warn_below=warn_below, fail_below=fail_below))
    overall = serve_verdict.worst([r.verdict for r in results])
    if args.json:
        print(json.dumps({"verdict": overall, "runs": [r.to_json() for r in results]}, indent=2))
    else:
        print("\n\n".join(serve_verdict.render(r) for r in results))
    return EXIT_FAILED if overall == serve_verdict.FAIL or (args.strict and overall == serve_verdict.WARN) else EXIT_OK

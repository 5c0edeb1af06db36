"""The planner's bound for a model on a node group as Prometheus recording rules, for the job dashboard.

`fmcluster plan-rules SPEC --model ...` runs the plan (the planner's own `report.build`, unchanged) and writes a rule
group `fmcluster.plan` of constants labelled with the cluster, node group, model and layout: the job dashboard
(dashboards/job.json) draws a job's achieved tokens per second and tensor activity next to them. Upload the file as
its own rule groups namespace (docs/observability.md, "Job dashboard and the plan's bound").
"""

from __future__ import annotations

from typing import Any, Dict, List

TOKENS_BOUND = "fmcluster:plan_tokens_per_second:bound"
TOKENS_SERIAL = "fmcluster:plan_tokens_per_second:serial"
MFU = "fmcluster:plan_mfu:assumed"
GPUS = "fmcluster:plan_gpus:count"
RECORDS = (TOKENS_BOUND, TOKENS_SERIAL, MFU, GPUS)
GROUP = "fmcluster.plan"
# `plan-rules --rl`: the RL step's time and its rollout share, per GPU group (the post-training dashboard)
RL_STEP = "fmcluster:plan_rl_step_seconds"
RL_ROLLOUT_SHARE = "fmcluster:plan_rl_rollout_share"
RL_RECORDS = (RL_STEP, RL_ROLLOUT_SHARE)
RL_GROUP = "fmcluster.plan_rl"


def _value(figure: Any) -> float:
    return float(figure["value"] if isinstance(figure, dict) else figure)


def _mfu(report: Dict[str, Any], best: Dict[str, Any]) -> float:
    """The MFU the plan expects of the layout: its estimate's (the calibrated rates), or the --mfu that replaced them."""
    estimate = (best.get("estimate") or {}).get("mfu")
    if estimate is not None:
        return _value(estimate)
    return float(report["options"].get("mfu") or 0.0)


def rule_groups(spec: Any, report: Dict[str, Any]) -> Dict[str, Any]:
    """One recording rule per figure and planned job (the fastest fitting layout of each GPU group)."""
    rules: List[Dict[str, Any]] = []
    model = report["model"]["name"]
    for job in report["jobs"]:
        if not job.get("fits"):
            continue
        best = job["best"][0]
        step = best["step"]
        labels = {"cluster": spec.name, "node_group": job["group"], "model": model,
                  "layout": best["layout"]["description"]}
        tokens = float(best["layout"]["tokens_per_step"])
        serial_s = _value(step["serial"])
        values = {TOKENS_BOUND: _value(step["tokens_per_s"]),
                  TOKENS_SERIAL: tokens / serial_s if serial_s > 0 else 0.0,
                  MFU: _mfu(report, best), GPUS: float(job["hardware"]["gpus"])}
        rules.extend({"record": name, "expr": f"vector({values[name]:.6g})", "labels": dict(labels)} for name in RECORDS)
    return {"groups": [{"name": GROUP, "interval": "5m", "rules": rules}]}


def rl_rule_groups(spec: Any, plans: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The RL plan's step (its pick, colocated or split) and the rollout's share of it, per GPU group."""
    rules: List[Dict[str, Any]] = []
    for plan in plans:
        pick = plan["pick"]
        labels = {"cluster": spec.name, "node_group": plan["group"], "model": plan["model"], "mode": pick["mode"]}
        values = {RL_STEP: float(pick["step_s"]), RL_ROLLOUT_SHARE: float(plan["where"]["rollout"])}
        rules.extend({"record": name, "expr": f"vector({values[name]:.6g})", "labels": dict(labels)}
                     for name in RL_RECORDS)
    return {"groups": [{"name": RL_GROUP, "interval": "5m", "rules": rules}]}

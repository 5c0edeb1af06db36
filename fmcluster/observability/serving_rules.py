"""The ``fmcluster.serving`` rule group, rendered at synth from the spec's `serving` deployments (each has its own SLOs,
engine and replica range): SLO burn on time to first token and time per output token over two window pairs, a queue
that keeps growing while the deployment runs all the replicas it may, and a KV cache full while the engine preempts.
The series are the engines' own, labelled with their served name (`model_name`, the deployment's name) and the
cluster by the scraper (fmcluster/platforms/kubernetes/metrics.py; docs/serving.md, "Telemetry").

SLO burn: the objective is that OBJECTIVE of a deployment's requests meet each SLO. A share q of requests over the SLO
is the same statement as the (1 - q) quantile of the engine's histogram being over it, whatever its buckets, so each
window's test is `histogram_quantile(1 - burn * budget, ...) > SLO`. Both windows of a pair must be over (the long one
says the budget is burning, the short one that it still is), with a floor of requests in the short window, so a single
slow request, or a handful at night, pages nobody (Google SRE workbook, "Alerting on SLOs", multiwindow multi-burn-rate
alerts: https://sre.google/workbook/alerting-on-slos/)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

GROUP_NAME = "fmcluster.serving"
OBJECTIVE = 0.90  # of requests within each SLO: the plan sizes the SLOs as means, so a tighter share would page by design
BUDGET = 1 - OBJECTIVE
MIN_REQUESTS = 50  # in the short window: below it a burn is a few requests, not a trend
KV_FULL = 0.95


@dataclass(frozen=True)
class Burn:
    severity: str
    long: str
    short: str
    burn: float  # times the budget
    for_: str

    @property
    def quantile(self) -> float:
        return round(1 - self.burn * BUDGET, 4)


# page when half the requests miss (the median is over the SLO) for an hour and still in the last 5 minutes; warn
# when a fifth do over 6 hours and the last 30 minutes
BURNS = (Burn("critical", "1h", "5m", 5, "2m"), Burn("warning", "6h", "30m", 2, "15m"))


@dataclass(frozen=True)
class EngineSeries:
    ttft: str  # histogram, without _bucket
    tpot: str  # histogram of per-request TPOT (vLLM) or per-step latency (SGLang)
    waiting: str
    kv_usage: str
    preemptions: str


ENGINES: Dict[str, EngineSeries] = {
    "vllm": EngineSeries("vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds",
                         "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total"),
    "sglang": EngineSeries("sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
                           "sglang:num_queue_reqs", "sglang:token_usage", "sglang:num_retracted_requests_total"),
}
BY = "cluster, model_name"


def _alert(name: str, expr: str, for_: str, severity: str, labels: Dict[str, str], summary: str, description: str,
           runbook: str) -> Dict[str, Any]:
    return {"alert": name, "expr": expr, "for": for_,
            "labels": {"severity": severity, "category": "serving", **labels},
            "annotations": {"summary": summary, "description": description, "runbook": runbook}}


def _quantile_over(metric: str, sel: str, q: float, window: str, slo_s: float) -> str:
    return f"histogram_quantile({q:g}, sum by ({BY}, le) (rate({metric}_bucket{sel}[{window}]))) > {slo_s:g}"


def burn_alerts(d: Any, cluster: str, namespace: str) -> List[Dict[str, Any]]:
    e = ENGINES[d.engine]
    sel = f'{{cluster="{cluster}",model_name="{d.name}"}}'
    out = []
    for slo, metric, ms in (("ttft", e.ttft, d.slo.ttft_ms), ("tpot", e.tpot, d.slo.tpot_ms)):
        for b in BURNS:
            expr = (f"({_quantile_over(metric, sel, b.quantile, b.long, ms / 1e3)})"
                    f" and ({_quantile_over(metric, sel, b.quantile, b.short, ms / 1e3)})"
                    f" and (sum by ({BY}) (increase({e.ttft}_count{sel}[{b.short}])) >= {MIN_REQUESTS})")
            share = f"{b.burn * BUDGET:.0%}"
            out.append(_alert(
                "ServingSloBurnFast" if b.severity == "critical" else "ServingSloBurnSlow", expr, b.for_, b.severity,
                {"slo": slo},
                f"{d.name}: more than {share} of requests miss the {slo.upper()} SLO of {ms:g} ms over {b.long}",
                f"The {slo.upper()} objective is {OBJECTIVE:.0%} of requests within {ms:g} ms; over the last {b.long} "
                f"and still over the last {b.short}, more than {share} missed it ({b.burn:g} times the error budget). "
                "Load beyond what the replicas serve, replicas lost, or a slower node.",
                "Grafana fmcluster / Serving, this model: queue, replicas and KV cache. Queue growing at max "
                "replicas: raise replicas.max (and the node group's max_count); replicas below what the scaler "
                f"wants: kubectl -n {namespace} get pods,scaledobject,hpa; a slow pod: its node's GPU health alerts."))
    return out


def queue_at_max_alert(d: Any, cluster: str) -> Dict[str, Any]:
    e = ENGINES[d.engine]
    sel = f'{{cluster="{cluster}",model_name="{d.name}"}}'
    most = sum(replicas.max for _, _, replicas in d.pools())
    # engines: one series per engine pod; growing: the slope of the deployment's queue over 10 minutes
    expr = (f"(sum by ({BY}) ({e.waiting}{sel}) > 0)"
            f" and (deriv(sum by ({BY}) ({e.waiting}{sel})[10m:1m]) > 0)"
            f" and (count by ({BY}) ({e.waiting}{sel}) >= {most})")
    return _alert(
        "ServingQueueGrowingAtMaxReplicas", expr, "10m", "critical", {},
        f"{d.name}: requests queue up and grow while all {most} replicas run",
        f"The engines' waiting queue has grown for 10 minutes with every replica the spec allows running "
        f"(replicas.max, {most} engine pods): the scaler has nothing left to add, so time to first token grows "
        "without bound.",
        "Raise the deployment's replicas.max and the node group's max_count (fmcluster diff, then deploy), shed "
        "load at the client, or size again with fmcluster plan --serve at the rate you see.")


def kv_full_alert(d: Any, cluster: str) -> Dict[str, Any]:
    e = ENGINES[d.engine]
    sel = f'{{cluster="{cluster}",model_name="{d.name}"}}'
    expr = (f"(max by ({BY}) ({e.kv_usage}{sel}) > {KV_FULL:g})"
            f" and (sum by ({BY}) (rate({e.preemptions}{sel}[5m])) > 0)")
    return _alert(
        "ServingKvCacheFullWithPreemptions", expr, "10m", "warning", {},
        f"{d.name}: the KV cache is full and the engine preempts requests",
        f"An engine's KV cache has been over {KV_FULL:.0%} full for 10 minutes while it preempts (vLLM) or retracts "
        "(SGLang) running requests to make room: their work is recomputed, so latency rises while throughput does "
        "not. A full cache alone is the engine working as sized; with preemptions it is over capacity.",
        "More replicas (replicas.min, or let the scaler reach max), a shorter max context, FP8 KV cache "
        "(kv_cache: fp8), or more GPUs per replica (parallelism); fmcluster plan --serve says the sequences a "
        "replica holds.")


def serving_group(cluster: str, serving: Any) -> Dict[str, Any]:
    """The ``fmcluster.serving`` rule group for `cluster`'s serving section (a Prometheus rule group, as a dict)."""
    rules: List[Dict[str, Any]] = []
    for d in serving.models:
        rules += burn_alerts(d, cluster, serving.namespace)
        rules += [queue_at_max_alert(d, cluster), kv_full_alert(d, cluster)]
    return {"name": GROUP_NAME, "interval": "1m", "rules": rules}

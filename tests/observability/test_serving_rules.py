"""The serving alerts, rendered for the eks serving example (vLLM, TTFT 2000 ms, TPOT 40 ms, 1 to 6 replicas) and run
by promtool on the engines' series: a burn fires on a sustained miss and not on single slow requests or a trickle of
traffic; a queue pages only while it grows with every replica running; a full KV cache warns only with preemptions."""

from __future__ import annotations

import subprocess
from typing import Any, Dict, List

import yaml

from fmcluster import observability as obs
from fmcluster.observability import metrics, serving_rules
from fmcluster.registry import load_spec

SPEC = load_spec("examples/eks-p5en-serving.yaml")
MODEL = SPEC.serving.models[0]
LABELS = {"cluster": "c", "model_name": MODEL.name}
TTFT = "vllm:time_to_first_token_seconds"


def _series(name: str, values: str, **extra: str) -> Dict[str, str]:
    labels = {**LABELS, **extra}
    return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


def _ttft(per_minute_under_1s: int, per_minute: int, minutes: int = 70) -> List[Dict[str, str]]:
    """TTFT histogram: `per_minute` requests a minute, `per_minute_under_1s` of them under a second, the rest between
    2.5 and 5 s."""
    fast = f"0+{per_minute_under_1s}x{minutes}"
    every = f"0+{per_minute}x{minutes}"
    return [_series(f"{TTFT}_bucket", fast, le="1"), _series(f"{TTFT}_bucket", fast, le="2.5"),
            _series(f"{TTFT}_bucket", every, le="5"), _series(f"{TTFT}_bucket", every, le="+Inf"),
            _series(f"{TTFT}_count", every)]


def _rules() -> Dict[str, Any]:
    return serving_rules.serving_group("c", SPEC.serving)


def _expected(alertname: str, **labels: str) -> Dict[str, Any]:
    """The alert as the group renders it: its labels and annotations, plus the series' labels."""
    rule = next(r for r in _rules()["rules"] if r["alert"] == alertname
                and all(r["labels"].get(k, v) == v for k, v in labels.items()))
    return {"exp_labels": {**LABELS, **rule["labels"]}, "exp_annotations": rule["annotations"]}


def _case(series: List[Dict[str, str]], eval_time: str, alertname: str, expected: List[Dict[str, Any]]) -> Dict:
    return {"interval": "1m", "input_series": series,
            "alert_rule_test": [{"eval_time": eval_time, "alertname": alertname, "exp_alerts": expected}]}


def test_serving_alerts_under_promtool(promtool, tmp_path):
    rules = tmp_path / "serving_rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [_rules()]}, sort_keys=False, width=200))
    waiting = "vllm:num_requests_waiting"
    pods = [f"p{i}" for i in range(6)]
    tests = [
        # most requests take 2.5-5 s against a 2 s SLO, for an hour at 10 req/s: both burns fire, on TTFT only
        _case(_ttft(10, 600), "70m", "ServingSloBurnFast", [_expected("ServingSloBurnFast", slo="ttft")]),
        _case(_ttft(10, 600), "70m", "ServingSloBurnSlow", [_expected("ServingSloBurnSlow", slo="ttft")]),
        # one slow request a minute among 600: nothing
        _case(_ttft(600, 601), "70m", "ServingSloBurnFast", []),
        _case(_ttft(600, 601), "70m", "ServingSloBurnSlow", []),
        # every request slow, but 3 a minute: below the floor of 50 in the short window
        _case(_ttft(0, 3), "70m", "ServingSloBurnFast", []),
        # the queue grows with all 6 replicas running: page; with 5 (the scaler can add one), or steady at 6: nothing
        _case([_series(waiting, "0+1x30", pod=p) for p in pods], "25m", "ServingQueueGrowingAtMaxReplicas",
              [_expected("ServingQueueGrowingAtMaxReplicas")]),
        _case([_series(waiting, "0+1x30", pod=p) for p in pods[:5]], "25m", "ServingQueueGrowingAtMaxReplicas", []),
        _case([_series(waiting, "5x30", pod=p) for p in pods], "25m", "ServingQueueGrowingAtMaxReplicas", []),
        # a full cache with preemptions warns; a full cache without them is the engine working as sized
        _case([_series("vllm:kv_cache_usage_perc", "0.98x30", pod="p0"),
               _series("vllm:num_preemptions_total", "0+5x30", pod="p0")], "20m",
              "ServingKvCacheFullWithPreemptions", [_expected("ServingKvCacheFullWithPreemptions")]),
        _case([_series("vllm:kv_cache_usage_perc", "0.98x30", pod="p0"),
               _series("vllm:num_preemptions_total", "7x30", pod="p0")], "20m",
              "ServingKvCacheFullWithPreemptions", []),
    ]
    path = tmp_path / "serving_rules_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests},
                                   sort_keys=False, width=200))
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    out = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_each_deployment_gets_its_own_slos_and_replica_range_and_catalog_metrics():
    hp = load_spec("examples/hyperpod-eks-p5en-serving.yaml")
    group = serving_rules.serving_group("hpeks-serve", hp.serving)
    d = hp.serving.models[0]
    exprs = [r["expr"] for r in group["rules"]]
    assert any(f"> {d.slo.ttft_ms / 1e3:g})" in e and "time_to_first_token" in e for e in exprs)
    assert any(f"> {d.slo.tpot_ms / 1e3:g})" in e and "time_per_output_token" in e for e in exprs)
    # disaggregated: the most engine pods are both pools' max
    (queue,) = [r for r in group["rules"] if r["alert"] == "ServingQueueGrowingAtMaxReplicas"]
    assert queue["expr"].endswith(f">= {d.prefill.replicas.max + d.decode.replicas.max})")
    assert not metrics.unknown_metrics(exprs)
    # the observability stack's rules carry the group for a spec with a serving section only
    assert serving_rules.GROUP_NAME in obs.rules_text("c", (), serving=hp.serving)
    assert serving_rules.GROUP_NAME not in obs.rules_text("c", ())


def test_the_serving_dashboard_reads_either_engine(promtool, tmp_path):
    """One dashboard for both engines: each panel's query answers from vLLM's series or SGLang's, per model."""
    dashboard = obs.dashboards()["serving"]
    panels = {p["title"]: p for p in dashboard["panels"]}
    assert panels["$model"].get("repeat") == "model"  # a row per model

    def expr(title: str, ref: str = "A") -> str:
        target = next(t for t in panels[title]["targets"] if t["refId"] == ref)
        return target["expr"].replace("$cluster", "c").replace("$model", MODEL.name)

    cases = []
    for engine, waiting in (("vllm", "vllm:num_requests_waiting"), ("sglang", "sglang:num_queue_reqs")):
        series = [_series(waiting, "4x12", pod="p0"), _series(waiting, "3x12", pod="p1"),
                  _series(f"{engine}:time_to_first_token_seconds_count", "0+60x12")]
        cases.append({"interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": expr("Queue and running requests"), "eval_time": "10m", "exp_samples": [{"labels": "{}", "value": 7}]},
            {"expr": expr("Requests per second"), "eval_time": "10m", "exp_samples": [{"labels": "{}", "value": 1}]}]})
    cases.append({"interval": "1m", "input_series": [], "promql_expr_test": [  # nothing reports: no data, not 0
        {"expr": expr("Queue and running requests"), "eval_time": "4m", "exp_samples": []}]})
    path = tmp_path / "serving_dashboard_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": cases}))
    out = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr

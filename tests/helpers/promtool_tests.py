"""Building promtool rule unit tests (`promtool test rules`) from Python: the series dcgm-exporter, the EFA collector
and kube-state-metrics write, per GPU, and an alert's expected annotations rendered from its own templates.

A scenario of 32 GPUs is 200-odd input series; written out by hand they hide what the scenario is. Here a GPU is
one line of what it reports, and the YAML promtool reads is generated from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional

from fmcluster import observability as obs

MINUTES = 21  # every input series runs this long, at one sample a minute


def _labels(name: str, labels: Mapping[str, Any]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def gauge(name: str, labels: Mapping[str, Any], value: float) -> Dict[str, str]:
    return {"series": _labels(name, labels), "values": f"{value:g}x{MINUTES}"}


def counter(name: str, labels: Mapping[str, Any], per_second: float) -> Dict[str, str]:
    """A counter that grows by `per_second` every second (one sample a minute)."""
    return {"series": _labels(name, labels), "values": f"0+{per_second * 60:.0f}x{MINUTES}"}


@dataclass
class Gpu:
    """One GPU as dcgm-exporter reports it. `job`: the labels that attribute it (hpc_job, or namespace/pod/container).
    The defaults are a GPU of a busy training job: SM activity 0.85, tensor activity 0.55, boost clock."""

    node: str
    gpu: int
    job: Mapping[str, str]
    sm: float = 0.85
    tensor: float = 0.55
    clock: float = 1980.0
    thermal: float = 0.0  # share of time thermal limits held the clocks down
    remap_pending: int = 0

    def series(self, cluster: str) -> List[Dict[str, str]]:
        labels = {"cluster": cluster, "node": self.node, "gpu": self.gpu, **self.job}
        series = [
            gauge("DCGM_FI_DEV_GPU_TEMP", labels, 60),
            gauge("DCGM_FI_PROF_SM_ACTIVE", labels, self.sm),
            gauge("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", labels, self.tensor),
            gauge("DCGM_FI_DEV_SM_CLOCK", labels, self.clock),
        ]
        # the exporter writes these for every GPU; the rules read them only where they are not 0, and promtool's time
        # grows with the series, so a healthy GPU's are left out
        if self.thermal:
            series.append(counter("DCGM_FI_DEV_THERMAL_VIOLATION", labels, self.thermal * 1e9))
        if self.remap_pending:
            series.append(gauge("DCGM_FI_DEV_ROW_REMAP_PENDING", labels, self.remap_pending))
        return series


def slurm_job(job: str, nodes: Iterable[str], gpus_per_node: int = 8) -> List[Gpu]:
    """A Slurm job's GPUs (dcgm-exporter's hpc_job label), busy and healthy, with the small spread real GPUs show:
    SM activity 0.83-0.87, tensor activity 0.54-0.56, SM clock 1950-1980 MHz."""
    return [_spread(Gpu(node, g, {"hpc_job": job}), i) for i, (node, g) in
            enumerate((n, g) for n in nodes for g in range(gpus_per_node))]


def _spread(gpu: Gpu, i: int) -> Gpu:
    gpu.sm = round(0.85 + 0.01 * ((i * 7) % 5 - 2), 3)
    gpu.tensor = round(0.55 + 0.005 * ((i * 3) % 5 - 2), 4)
    gpu.clock = 1980.0 - 15 * ((i * 5) % 3)
    return gpu


def pick(gpus: List[Gpu], node: str, gpu: Optional[int] = None) -> List[Gpu]:
    found = [g for g in gpus if g.node == node and (gpu is None or g.gpu == gpu)]
    assert found, (node, gpu)
    return found


def efa(cluster: str, node: str, bytes_per_s: float, *, drops_per_s: float = 0.0, active: int = 1) -> List[Dict[str, str]]:
    """One EFA device of a node as the EFA collector writes it (hw_counters)."""
    labels = {"cluster": cluster, "node": node, "device": "rdmap16s27", "port": "1"}
    return [counter("fmcluster_efa_hw_stat_total", {**labels, "counter": "rx_bytes"}, bytes_per_s / 2),
            counter("fmcluster_efa_hw_stat_total", {**labels, "counter": "tx_bytes"}, bytes_per_s / 2),
            counter("fmcluster_efa_hw_stat_total", {**labels, "counter": "rx_drops"}, drops_per_s),
            gauge("fmcluster_efa_port_active", labels, active)]


# --- expected alerts ---------------------------------------------------------------------------------------------

_IF = re.compile(r"\{\{\s*if\s+\$labels\.(\w+)\s*\}\}(.*?)(?:\{\{\s*else\s*\}\}(.*?))?\{\{\s*end\s*\}\}", re.S)
_LABEL = re.compile(r"\{\{\s*\$labels\.(\w+)\s*\}\}")


def render(template: str, labels: Mapping[str, str]) -> str:
    """The subset of Prometheus' Go templates the straggler alert uses: {{ $labels.x }} and
    {{ if $labels.x }}...{{ else }}...{{ end }} (a missing label is empty, as in Go)."""
    text = _IF.sub(lambda m: m.group(2) if labels.get(m.group(1)) else (m.group(3) or ""), template)
    left = _LABEL.sub(lambda m: labels.get(m.group(1), ""), text)
    assert "{{" not in left, f"template construct not rendered here: {left}"
    return left


def alert_rule(name: str) -> Dict[str, Any]:
    return next(rule for _, rule in obs.iter_rules() if rule.get("alert") == name)


def expected_alert(name: str, labels: Mapping[str, Any]) -> Dict[str, Any]:
    rule = alert_rule(name)
    all_labels = {**{k: str(v) for k, v in labels.items()}, **rule["labels"]}
    annotations = {k: render(v, {**all_labels}) for k, v in rule["annotations"].items()}
    return {"exp_labels": all_labels, "exp_annotations": annotations}


@dataclass
class Scenario:
    """One promtool test group: the series, and what must (and must not) fire or be recorded."""

    name: str
    cluster: str = "c"
    series: List[Dict[str, str]] = field(default_factory=list)
    alerts: Dict[str, List[Dict[str, Any]]] = field(default_factory=dict)  # alert name -> expected at `at`
    quiet_before: str = "8m"  # before the alerts' `for` has passed, nothing fires
    at: str = "20m"
    exprs: List[Dict[str, Any]] = field(default_factory=list)

    def add_gpus(self, gpus: Iterable[Gpu]) -> None:
        for g in gpus:
            self.series += g.series(self.cluster)

    def expect(self, alert: str, *labels: Mapping[str, Any]) -> None:
        self.alerts.setdefault(alert, []).extend(expected_alert(alert, {"cluster": self.cluster, **lb}) for lb in labels)

    def expect_samples(self, expr: str, samples: Iterable[Mapping[str, Any]], at: Optional[str] = None) -> None:
        self.exprs.append({"expr": expr, "eval_time": at or self.at,
                           "exp_samples": [{"labels": s["labels"], "value": s["value"]} for s in samples]})

    def to_test(self) -> Dict[str, Any]:
        tests: List[Dict[str, Any]] = []
        for alert, expected in self.alerts.items():
            tests += [{"eval_time": self.quiet_before, "alertname": alert, "exp_alerts": []},
                      {"eval_time": self.at, "alertname": alert, "exp_alerts": expected}]
        test: Dict[str, Any] = {"name": self.name, "interval": "1m", "input_series": self.series}
        if tests:
            test["alert_rule_test"] = tests
        if self.exprs:
            test["promql_expr_test"] = self.exprs
        return test


def test_file(rule_files: List[str], scenarios: Iterable[Scenario]) -> Dict[str, Any]:
    """Groups that set their own interval (fmcluster.jobs: 1m, as AMP runs it) keep it; the alert groups are
    evaluated every 2 minutes here, which halves promtool's time and changes no outcome (`for` is 10 minutes)."""
    return {"rule_files": rule_files, "evaluation_interval": "2m", "tests": [s.to_test() for s in scenarios]}

"""Every metric an alert, recording rule or dashboard uses is produced by an exporter we deploy or by our validator."""

from __future__ import annotations

import re

import pytest

from fmcluster import observability as obs
from fmcluster.acceptance import plan_rules
from fmcluster.observability import metrics

# the static rules' records, and the plan's bound that `fmcluster plan-rules` records (uploaded beside them)
RECORDED = (frozenset(rule["record"] for _, rule in obs.iter_rules() if "record" in rule)
            | frozenset(plan_rules.RECORDS) | frozenset(plan_rules.RL_RECORDS))
RULE_EXPRS = [rule["expr"] for _, rule in obs.iter_rules()]
DASHBOARDS = obs.dashboards()


def test_metric_name_scanner():
    expr = (
        'sum by (cluster, node) (rate(fmcluster_efa_hw_stat_total{counter=~"rx_drops|x"}[5m])) > 0 '
        'and on (node) DCGM_FI_DEV_GPU_UTIL{node=~"$node"} < 1e9 or vector(0) offset 5m'
    )
    assert metrics.metric_names(expr) == {"fmcluster_efa_hw_stat_total", "DCGM_FI_DEV_GPU_UTIL"}
    assert metrics.metric_names('label_values(up{cluster="$cluster"}, node)') == {"up"}
    assert metrics.metric_names("time() - min(fmcluster:x:y{a=\"b\"})") == {"fmcluster:x:y"}


def test_every_rule_metric_is_in_the_catalog():
    assert not metrics.unknown_metrics(RULE_EXPRS, RECORDED)


def test_recording_rules_use_catalog_metrics_or_rules_recorded_before_them_in_their_group():
    """Prometheus evaluates a group's rules in order, each seeing the values recorded before it in the same
    evaluation; a rule of another group (or a later one) would lag or read nothing on the first evaluation."""
    for group in obs.load_rules()["groups"]:
        earlier: set = set()
        for rule in group["rules"]:
            if "record" in rule:
                assert not metrics.unknown_metrics([rule["expr"]], frozenset(earlier)), (group["name"], rule["record"])
                earlier.add(rule["record"])


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_dashboard_metric_is_in_the_catalog(name):
    exprs = obs.dashboard_queries(DASHBOARDS[name])
    assert len(exprs) >= 5
    assert not metrics.unknown_metrics(exprs, RECORDED)


def test_every_catalog_metric_is_used_somewhere():
    used = set()
    for expr in RULE_EXPRS + [q for d in DASHBOARDS.values() for q in obs.dashboard_queries(d)]:
        used |= metrics.metric_names(expr)
    assert not set(metrics.BY_NAME) - used, "catalog entries nothing uses: drop them or use them"


def test_every_dcgm_metric_is_enabled_in_the_dcgm_exporter_field_list():
    for arch in obs.dcgm_arch_files():
        per_node = obs.dcgm_fields(arch)
        assert len(per_node) == len(set(per_node)), arch
    fields = obs.dcgm_fields() + [f for arch in obs.dcgm_arch_files() for f in obs.dcgm_fields(arch)]
    dcgm = {m.name for m in metrics.CATALOG if m.exporter == metrics.DCGM_EXPORTER}
    assert dcgm <= set(fields), f"not collected by dcgm-exporter: {sorted(dcgm - set(fields))}"
    assert all(n.startswith(("DCGM_FI_", "DCGM_EXP_")) for n in dcgm)


def test_every_catalog_metric_names_a_known_exporter():
    assert {m.exporter for m in metrics.CATALOG} <= set(metrics.EXPORTERS)
    assert len(metrics.BY_NAME) == len(metrics.CATALOG)
    for m in metrics.CATALOG:
        assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", m.name) and m.type in ("gauge", "counter")


def _prom_names(text: str) -> dict:
    """metric name -> set of label names, from a Prometheus text exposition."""
    found: dict = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
        assert m, line
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
        found.setdefault(m.group(1), set()).update(labels)
    return found


def test_the_validator_writes_every_validator_metric_we_use():
    """The contract with fmcluster/runtime: render a report with the validator's own code and compare."""
    report_mod = pytest.importorskip("fmcluster.runtime.report")
    report = {
        "instance_type": "p5.48xlarge",
        "level": "standard",
        "verdict": "fail",
        "failing": ["efa.devices"],
        "duration_s": 4.2,
        "finished_unix": 1767225600,
        "checks": [
            {"id": "efa.devices", "layer": "D", "status": "fail", "duration_s": 0.01},
            {"id": "gpu.count", "layer": "B", "status": "pass", "duration_s": 0.2},
        ],
    }
    written = _prom_names(report_mod.to_prom(report))
    for m in metrics.CATALOG:
        if m.exporter == metrics.VALIDATOR:
            assert m.name in written, f"the validator does not write {m.name}"
            assert set(m.labels) <= written[m.name], f"{m.name}: labels {m.labels} vs written {written[m.name]}"
    statuses = set(re.findall(r'status="([a-z]+)"', report_mod.to_prom(report)))
    assert statuses == set(metrics.CHECK_STATUSES)

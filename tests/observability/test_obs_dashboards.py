"""The Grafana dashboards shipped in fmcluster/observability/dashboards."""

from __future__ import annotations

import pytest

from fmcluster import observability as obs

DASHBOARDS = obs.dashboards()
REQUIRED = {"cluster-overview", "gpu-health", "efa-network", "storage", "node-validation", "job", "post-training"}


def _panels(items):
    for p in items:
        yield p
        yield from _panels(p.get("panels", []))


def test_the_dashboards_exist_with_unique_uids():
    assert REQUIRED <= set(DASHBOARDS)
    uids = [d["uid"] for d in DASHBOARDS.values()]
    assert len(uids) == len(set(uids))
    assert all(len(u) <= 40 for u in uids), "Grafana uids are at most 40 characters"


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_is_importable_anywhere(name):
    d = DASHBOARDS[name]
    assert "id" not in d or d["id"] is None, "a fixed id breaks import into another Grafana"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = list(_panels(d["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for p in panels:
        assert 0 <= p["gridPos"]["x"] and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}", p["title"]
            assert p["targets"], p["title"]


# --- no data is no data ----------------------------------------------------------------------


def test_no_query_turns_no_data_into_zero():
    """`or vector(0)` answers 0 when nothing reports at all: a dead collector looked like a healthy cluster."""
    found = [(name, q) for name, d in DASHBOARDS.items() for q in obs.dashboard_queries(d) if "vector(" in q]
    assert not found


def _panel_expr(dashboard: str, title: str) -> str:
    [expr] = [t["expr"] for p in _panels(DASHBOARDS[dashboard]["panels"]) if p["title"] == title
              for t in p.get("targets", [])]
    return expr.replace("$cluster", "c").replace("$node", ".*").replace("$job_id", "slurm/1")


# (dashboard, panel, input series, value expected: None = no data)
NO_DATA_CASES = [
    ("cluster-overview", "Slurm nodes drained/down", [], None),
    ("cluster-overview", "Slurm nodes drained/down",
     [('fmcluster_slurm_collector_success{cluster="c",node="login"}', "1x5"),
      ('fmcluster_slurm_node_state{cluster="c",node="login",slurm_node="gpu-1",state="idle"}', "1x5")], 0),
    ("cluster-overview", "Slurm nodes drained/down",  # one down node, reported by two collectors: 1
     [('fmcluster_slurm_collector_success{cluster="c",node="login"}', "1x5"),
      ('fmcluster_slurm_node_state{cluster="c",node="login",slurm_node="gpu-1",state="down"}', "1x5"),
      ('fmcluster_slurm_node_state{cluster="c",node="head",slurm_node="gpu-1",state="down"}', "1x5")], 1),
    ("cluster-overview", "Slurm nodes drained/down",  # sinfo failing: unknown, not 0
     [('fmcluster_slurm_collector_success{cluster="c",node="login"}', "0x5")], None),
    ("cluster-overview", "Critical alerts firing", [], None),
    ("cluster-overview", "Critical alerts firing", [('up{cluster="c",node="n1",job="node"}', "1x5")], 0),
    ("node-validation", "Nodes failing validation", [], None),
    ("node-validation", "Nodes failing validation",
     [('fmcluster_node_validation_healthy{cluster="c",node="n1"}', "1x5"),
      ('fmcluster_node_validation_healthy{cluster="c",node="n2"}', "0x5")], 1),
    ("storage", "Nodes with an unresponsive Lustre mount", [], None),
    ("storage", "Nodes with an unresponsive Lustre mount",
     [('node_filesystem_device_error{cluster="c",node="n1",fstype="lustre",mountpoint="/fsx"}', "0x5")], 0),
    ("job", "Straggler alerts", [], None),
    ("job", "Straggler alerts", [('fmcluster:job_gpus:count{cluster="c",job_id="slurm/1"}', "16x5")], 0),
    ("job", "Straggler alerts",
     [('fmcluster:job_gpus:count{cluster="c",job_id="slurm/1"}', "16x5"),
      ('ALERTS{alertname="JobStragglerNode",alertstate="firing",cluster="c",job_id="slurm/1",node="n2"}', "1x5")], 1),
]


def test_panels_show_no_data_as_no_data_and_zero_as_zero(tmp_path, promtool):
    """Each panel query evaluated by promtool on the series given: no series, no data; reported, the real count."""
    import subprocess

    import yaml

    tests = []
    for dashboard, title, series, value in NO_DATA_CASES:
        samples = [] if value is None else [{"labels": "{}", "value": value}]
        tests.append({"interval": "1m", "input_series": [{"series": s, "values": v} for s, v in series],
                      "promql_expr_test": [{"expr": _panel_expr(dashboard, title), "eval_time": "3m",
                                            "exp_samples": samples}]})
    path = tmp_path / "panels_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": tests}))
    out = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr

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


def test_post_training_shows_an_xid_on_a_ray_workers_node_against_its_job_and_no_other(tmp_path, promtool):
    """The Xid alerts apply to Ray's workers as to any GPU, and the post-training dashboard puts one on the job whose
    pods hold the node: KubeRay's RayCluster owns the head and worker pods (one job, fmcluster:gpu_job:info), and the
    panel keeps the Xid alerts of that job's nodes. A second job's Xid on its own node stays off the RayJob's panel.
    The rules run in promtool (their ALERTS series are what the panel reads)."""
    import subprocess

    import yaml
    from helpers.promtool_tests import Gpu, expected_alert, gauge

    ns, ray = "training", "verl-grpo-x7k2p"
    series, gpus = [], []
    for node, pod in (("ip-10-0-2-1", f"{ray}-head-abcde"), ("ip-10-0-2-2", f"{ray}-gpu-worker-fghij")):
        series.append(gauge("kube_pod_owner", {"cluster": "c", "namespace": ns, "pod": pod, "owner_kind": "RayCluster",
                                               "owner_name": ray, "owner_is_controller": "true"}, 1))
        gpus += [Gpu(node, g, {"namespace": ns, "pod": pod, "container": "ray-worker"}) for g in range(8)]
    gpus += [Gpu("ip-10-0-9-9", g, {"hpc_job": "5"}) for g in range(8)]  # another job, on its own node
    for g in gpus:
        series += g.series("c")
    xid = {"cluster": "c", "node": "ip-10-0-2-2", "gpu": 3, "namespace": ns, "pod": f"{ray}-gpu-worker-fghij",
           "container": "ray-worker", "xid": "79"}
    other = {"cluster": "c", "node": "ip-10-0-9-9", "gpu": 0, "hpc_job": "5", "xid": "48"}
    series += [gauge("DCGM_EXP_XID_ERRORS_COUNT", xid, 1), gauge("DCGM_EXP_XID_ERRORS_COUNT", other, 1)]
    title = "Straggler and Xid alerts on the job's nodes"
    (query,) = [t["expr"] for p in _panels(DASHBOARDS["post-training"]["panels"]) if p["title"] == title
                for t in p["targets"] if "GpuXid" in t["expr"]]
    query = query.replace("$cluster", "c").replace("$job_id", f"{ns}/{ray}")

    def firing(name: str, severity: str) -> str:  # the ALERTS series of the Ray worker's Xid
        labels = {**xid, "severity": severity, "category": "hardware", "alertname": name, "alertstate": "firing"}
        return "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"

    on_panel = [{"labels": firing("GpuXidCritical", "critical"), "value": 1},
                {"labels": firing("GpuXidError", "warning"), "value": 1}]
    test = {"rule_files": [str(obs.RULES_FILE)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [{"eval_time": "5m", "alertname": "GpuXidCritical", "exp_alerts": [
            expected_alert("GpuXidCritical", xid), expected_alert("GpuXidCritical", other)]}],
        "promql_expr_test": [{"expr": query, "eval_time": "5m", "exp_samples": on_panel}],
    }]}
    path = tmp_path / "ray_xid_test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=200))
    out = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr

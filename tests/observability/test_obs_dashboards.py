"""The Grafana dashboards shipped in fmcluster/observability/dashboards."""

from __future__ import annotations

import pytest

from fmcluster import observability as obs

DASHBOARDS = obs.dashboards()
REQUIRED = {"cluster-overview", "gpu-health", "efa-network", "storage", "node-validation"}


def _panels(items):
    for p in items:
        yield p
        yield from _panels(p.get("panels", []))


def test_the_five_dashboards_exist_with_unique_uids():
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

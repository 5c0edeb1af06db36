"""A store's dashboard panels live in its folder and are composed into the storage dashboard and the cluster
overview; users import the composed dashboards from the repository's dashboards/, which scripts/dashboards.py writes
and this test holds current."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fmcluster import observability as obs
from fmcluster import registry

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

import dashboards as writer  # noqa: E402 - scripts/dashboards.py


def panels(d):
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])


def test_every_store_dashboard_file_is_declared_by_its_store():
    declared = {s.dashboard for s in registry.stores() if s.dashboard is not None}
    assert declared == set(obs.STORE_DASHBOARD_FILES) and declared


def test_the_dashboards_users_import_are_current():
    assert writer.stale(writer.expected_files()) == [], "dashboards/ is stale: run python scripts/dashboards.py write"


def test_without_a_store_the_dashboards_name_none_and_keep_their_own_panels():
    bare = obs.dashboards(stores=())
    assert not [name for name, d in bare.items() if "lustre" in json.dumps(d).lower()]
    assert [p["title"] for p in panels(bare["storage"])] == ["Local disks", "Root volume free",
                                                             "Instance store (/opt/dlami/nvme) free"]
    assert bare["storage"]["description"] == "Local disks."


def test_a_stores_panels_are_stacked_in_the_storage_dashboard_and_join_the_overviews_first_row(tmp_path):
    toy = tmp_path / "dashboard.json"
    stat = {"type": "stat", "title": "Toy free", "id": 1, "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 4, "w": 4, "x": 0, "y": 0}, "targets": [{"refId": "A", "expr": "toy_free"}]}
    row = {"type": "row", "title": "Toy", "id": 1, "collapsed": False, "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0},
           "panels": []}
    toy.write_text(json.dumps({"description": "toy capacity", "storage": [row, {**stat, "id": 2, "gridPos": {
        "h": 4, "w": 6, "x": 0, "y": 1}}], "overview": [stat]}))
    d = obs.dashboards(stores=(*obs.STORE_DASHBOARD_FILES, toy))
    storage, alone = d["storage"], obs.dashboards()["storage"]
    titles, before = [p["title"] for p in storage["panels"]], [p["title"] for p in alone["panels"]]
    assert titles == before[:6] + ["Toy", "Toy free"] + before[6:], "the file system's, the toy's, the local disks"
    by_title = {p["title"]: p for p in storage["panels"]}
    assert by_title["Toy"]["gridPos"]["y"] == 17 and by_title["Local disks"]["gridPos"]["y"] == 22
    assert [p["id"] for p in storage["panels"]] == list(range(1, len(titles) + 1))
    assert storage["description"].endswith("(node_exporter statfs), and toy capacity, and local disks.")
    first_row = [p for p in d["cluster-overview"]["panels"] if p["gridPos"]["y"] == 1]
    assert first_row[-1]["title"] == "Toy free" and len(first_row) == 7
    assert [(p["gridPos"]["x"], p["gridPos"]["w"]) for p in first_row] == [(x, 3) for x in range(0, 21, 3)]


def test_a_base_imported_alone_cannot_overwrite_its_composed_dashboard():
    bases = sorted(obs.DASHBOARD_DIR.glob("*.base.json"))
    assert [b.name for b in bases] == ["cluster-overview.base.json", "storage.base.json"]
    assert all("uid" not in json.loads(b.read_text()) for b in bases)
    shipped = obs.dashboards()
    assert shipped["storage"]["uid"] == "fmcluster-storage" and shipped["cluster-overview"]["uid"] == "fmcluster-overview"
    uids = [d["uid"] for d in shipped.values()]
    assert len(uids) == len(set(uids))


def test_writing_the_dashboards_leaves_a_file_a_person_put_there(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "OUT", tmp_path)
    mine = tmp_path / "team.json"
    mine.write_text(json.dumps({"uid": "team-latency", "title": "ours"}))
    (tmp_path / "retired.json").write_text(json.dumps({"uid": "fmcluster-retired"}))
    expected = writer.expected_files()
    assert all(json.loads(text)["uid"].startswith(writer.UID_PREFIX) for text in expected.values())
    writer.write(expected)
    assert mine.read_text() == json.dumps({"uid": "team-latency", "title": "ours"})
    assert not (tmp_path / "retired.json").exists() and writer.stale(expected) == []
    (tmp_path / "storage.json").write_text(json.dumps({"uid": "team-storage"}))
    with pytest.raises(SystemExit, match="not a dashboard fmcluster wrote"):
        writer.write(expected)
    assert json.loads((tmp_path / "storage.json").read_text()) == {"uid": "team-storage"}

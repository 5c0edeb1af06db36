"""The storage and overview dashboards composed with the stores' panels.

A store's folder holds its Grafana panels (``dashboard.json``, `Store.dashboard`), as it holds its alert rules: a
``description`` of what they show, ``storage`` (its rows and panels of the storage dashboard, placed from the top)
and ``overview`` (its stats in the first row of the cluster overview). The bases beside this module
(``dashboards/<name>.base.json``) hold what no store says: the storage dashboard's local disks and the overview's other
panels. A base has no uid, which only the composed dashboard gets: imported alone, it could never overwrite the whole
dashboard with a part of it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List, Sequence

GRID_WIDTH = 24  # Grafana's grid is 24 columns wide


def store_parts(paths: Sequence[Path]) -> List[Dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


def _renumbered(panels: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Panel ids in the order the panels come (a dashboard's ids are unique; the composition shifts them)."""
    for i, panel in enumerate(panels, start=1):
        panel["id"] = i
    return panels


def _bottom(panels: List[Dict[str, Any]]) -> int:
    return max((p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels), default=0)


def storage(base: Dict[str, Any], parts: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The storage dashboard: each store's panels stacked from the top, in the stores' order, then the base's."""
    d = copy.deepcopy(base)
    panels: List[Dict[str, Any]] = []
    for part in parts:
        top = _bottom(panels)
        for panel in copy.deepcopy(part.get("storage", [])):
            panel["gridPos"]["y"] += top
            panels.append(panel)
    top = _bottom(panels)
    for panel in d["panels"]:
        panel["gridPos"]["y"] += top
    d["panels"] = _renumbered(panels + d["panels"])
    said = [part["description"] for part in parts if part.get("storage")]
    if said:  # "<store's>, and <store's>, and local disks."
        rest = d["description"]
        d["description"] = ", and ".join([*said, rest[:1].lower() + rest[1:]])
    return d


def overview(base: Dict[str, Any], parts: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The cluster overview: the stores' stats join its first row, which its stats share evenly."""
    d = copy.deepcopy(base)
    panels = d["panels"]
    start = next(i for i, p in enumerate(panels) if p["type"] == "row") + 1
    end = next((i for i in range(start, len(panels)) if panels[i]["type"] == "row"), len(panels))
    row = panels[start:end] + [p for part in parts for p in copy.deepcopy(part.get("overview", []))]
    width = GRID_WIDTH // len(row)
    y = panels[start - 1]["gridPos"]["y"] + 1
    for i, panel in enumerate(row):
        panel["gridPos"].update(x=i * width, y=y, w=width)
    d["panels"] = _renumbered(panels[:start] + row + panels[end:])
    return d


BASE = ".base"  # a composed dashboard's base file: <name>.base.json
# name -> (its uid, how the stores' parts join its base)
COMPOSED = {"storage": ("fmcluster-storage", storage), "cluster-overview": ("fmcluster-overview", overview)}


def composed(name: str, base: Dict[str, Any], parts: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    uid, join = COMPOSED[name]
    return {"uid": uid, **join(base, parts)}

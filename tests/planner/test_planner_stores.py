"""The planner asks every registered store for its figures (`Store.figures`) and names none: a store added to the
registry shows in `fmcluster plan` (its summary under its key, its lines in the text and the HTML page, its cost line
priced from its own data, what it bills by use, its checkpoint target) and in `fmcluster diagram`, with nothing of the
planner changed."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest
from helpers import ROOT

from fmcluster import registry
from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build
from fmcluster.platforms.storage import Store, StoreFigures

TOY_PRICE = {"status": "quoted", "source": "the toy's price page"}


class ToyFigures(StoreFigures):
    summarised = True
    short = "Toy"
    unbilled = ("toy snapshots",)
    formulas = {"capacity_tb": "disks x 1 TB"}

    def summary(self, spec: Any, section: Any, kit: Any) -> Dict[str, Any]:
        return {"capacity_tb": section.disks}

    def summary_lines(self, summary: Any, kit: Any) -> List[str]:
        return [f"  storage: toy store, {summary['capacity_tb']} TB"]

    def summary_html(self, summary: Any, kit: Any) -> str:
        return f"<p>toy store, {summary['capacity_tb']} TB</p>"

    def charges(self, spec: Any, section: Any, kit: Any) -> List[Dict[str, Any]]:
        return [{"item": "Toy store", "detail": f"{section.disks} disks", "usd_per_month": 730.0 * section.disks,
                 "entry": TOY_PRICE, "notes": [], "formula": "disks x USD per disk-month",
                 "inputs": {"disks": section.disks}}]

    def checkpoint_targets(self, spec: Any, section: Any, size: float, group: Any, steps: Any,
                           kit: Any) -> List[Dict[str, Any]]:
        write = kit.fig(size / 1e9, "s", "size / 1 GB/s", size=size)
        return [{"target": "toy store", "available": True, "write": write, "restore": write,
                 "write_steps": steps(kit.val(write)), "durable": True, "unverified": True}]

    def diagram(self, spec: Any, section: Any, graph: Any, kit: Any) -> None:
        graph.vpc.node("toy", "toy store", shape="cylinder")


@dataclass(frozen=True)
class ToyStore(Store):
    def section(self, spec: Any) -> Any:  # configured in every spec of this test
        return SimpleNamespace(disks=2)

    def figures(self) -> StoreFigures:
        return ToyFigures()


TOY = ToyStore(name="toy", title="Toy", spec_key="toy", resources="a toy store")


@pytest.fixture(scope="module")
def with_a_toy_store():
    saved = list(registry.STORES)
    registry.STORES.append(TOY)
    try:
        spec = registry.load_spec(ROOT / "examples" / "eks-p5.yaml")
        yield spec, build(spec, preset("llama3-70b"), PlanOptions())
    finally:
        registry.STORES[:] = saved


def test_its_summary_and_formulas_are_filed_under_its_key(with_a_toy_store):
    _, plan = with_a_toy_store
    assert plan["cluster"]["storage"]["toy"] == {"capacity_tb": 2}
    assert plan["cluster"]["storage"]["fsx"]["capacity_gib"] == 4800, "the example's own store still summarised"
    assert plan["cluster"]["formulas"]["toy.capacity_tb"] == "disks x 1 TB"


def test_its_cost_line_is_priced_from_its_own_data_and_its_usage_is_not_included(with_a_toy_store):
    _, plan = with_a_toy_store
    (line,) = [ln for ln in plan["cost"]["lines"] if ln["item"] == "Toy store"]
    assert line["usd_per_hour"]["value"] == pytest.approx(2.0) and line["source"] == "the toy's price page"
    assert line["usd_per_month"]["value"] == pytest.approx(1460.0)
    assert "toy snapshots" in plan["cost"]["not_included"][0]


def test_its_checkpoint_target_is_planned_beside_the_others(with_a_toy_store):
    _, plan = with_a_toy_store
    targets = [t["target"] for t in plan["jobs"][0]["checkpoint"]["targets"]]
    assert "toy store" in targets and "FSx for Lustre" in targets


def test_text_html_and_diagram_show_it(with_a_toy_store):
    from fmcluster.planner.html import cluster_section
    from fmcluster.planner.text import render

    spec, plan = with_a_toy_store
    assert "  storage: toy store, 2 TB" in render(plan).splitlines()
    assert "<p>toy store, 2 TB</p>" in cluster_section(plan, spec)
    assert "    toy store: write >= " in render(plan)
    pytest.importorskip("graphviz")
    from fmcluster.planner.diagram import graph

    assert 'toy [label="toy store"' in graph(spec).source


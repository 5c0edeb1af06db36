"""Near-ties are reported as a tie group with the band it comes from, and the conventional layout inside it is picked
and explained, in text, JSON and HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.planner import hardware, spec

from fmcluster.planner.cli import main
from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build
from fmcluster.planner.search import evaluate
from fmcluster.planner.text import render
from fmcluster.planner.ties import ERROR_BAND, tie_group, tie_ratio

DEFAULT = str(Path(__file__).resolve().parents[2] / "examples" / "default.yaml")


def test_the_band_is_the_calibrations_and_the_tie_ratio_follows_from_it():
    assert ERROR_BAND == 0.15
    # two estimates each within 15% of the truth can be in either order up to 1.15 / 0.85 apart
    assert tie_ratio(ERROR_BAND) == pytest.approx(1.15 / 0.85)


def test_every_layout_of_the_tie_group_lies_within_the_ratio_of_the_fastest_and_no_other_does():
    m, hw = preset("llama3-70b"), hardware("p5.48xlarge", 8)
    cands = evaluate(m, hw, 4 * 2**20, 1)
    group = tie_group(cands, hw, 4 * 2**20)
    best = min(c.per_token_s for c in cands if c.fits)
    inside = {id(c) for c in group.members}
    for c in cands:
        if c.fits:
            assert (id(c) in inside) == (c.per_token_s <= best * tie_ratio(ERROR_BAND) + 1e-15), c.layout.key()


def test_the_pick_is_the_conventional_layout_of_the_group_and_says_why():
    """Llama 3.1 70B on 64 H100: layouts with context parallelism or more pipeline stages sit in the group, yet the
    pick has none of the first and the fewest of the second its sharding allows, and the reasons say so."""
    report = build(spec("p5.48xlarge", 8), preset("llama3-70b"), PlanOptions())
    job = report["jobs"][0]
    ties, pick = job["ties"], job["best"][0]
    assert pick["layout"]["cp"] == 1 and pick["in_tie_group"] and ties["pick"] == ties["members"][0]
    rows = {r["layout"]: r for r in job["layouts"]}
    members = [rows[k] for k in ties["members"]]
    assert any(r["cp"] > 1 for r in members)
    assert pick["layout"]["pp"] == min(r["pp"] for r in members if r["cp"] == 1 and r["recompute"] != "full"
                                       and r["sharding"] == pick["layout"]["sharding"])
    assert ties["reasons"][0].startswith("no context parallelism at 8,192 tokens")
    assert ties["band"] == ERROR_BAND and ties["size"] == len(ties["members"]) >= 2


def test_text_json_and_html_show_the_tie_group_and_its_band(capsys, tmp_path):
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--json"]) == 0
    job = json.loads(capsys.readouterr().out)["jobs"][0]
    assert job["ties"]["ratio"] == pytest.approx(1.15 / 0.85) and "calibration" in job["ties"]["band_source"]
    assert sum(r["in_tie_group"] for r in job["layouts"]) == job["ties"]["size"]
    text = render(build(spec("p5.48xlarge", 2), preset("llama3-8b"), PlanOptions()))
    assert "  tie group: " in text and "within 1.35x of the fastest" in text and "±15%" in text
    assert "\n  pick: tp=" in text
    out = tmp_path / "p.html"
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--html", str(out)]) == 0
    html = out.read_text()
    assert "Tie group: " in html and "Pick: " in html and "±15%" in html

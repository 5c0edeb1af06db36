"""`plan --serve` on the published vLLM and SGLang runs of data/serving_calibration.json: the replica model's figure for
each against the published one, within the calibration's band (docs/serving.md, "Calibration")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fmcluster.planner.models import DATA
from fmcluster.planner.serving import calibration
from fmcluster.planner.serving.calibration import ERROR_BAND
from fmcluster.spec import serving_sizing

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def points():
    return calibration.points()


def test_at_least_six_published_runs_of_vllm_and_sglang_on_h100_h200_and_b200_each_with_its_source():
    raw = json.loads((DATA / "serving_calibration.json").read_text())
    runs = calibration.runs()
    assert len(runs) >= 6 and len({r.id for r in runs}) == len(runs) == len(raw["runs"])
    for r in raw["runs"]:
        assert r["source"]["url"].startswith("https://") and len(r["source"]["where"]) > 20, r["id"]
        assert r["engine"].split()[0] in ("vllm", "sglang"), r["id"]
        assert set(r["published"]) <= set(calibration.METRICS) and all(v > 0 for v in r["published"].values())
    assert {r.replica.hw.name for r in runs} == {"H100", "H200", "B200"}
    assert {r.engine.split()[0] for r in runs} == {"vllm", "sglang"}
    assert len({r.replica.arch.name for r in runs}) >= 4 and any(r.replica.arch.is_moe for r in runs)
    assert all(e["why"] for e in raw["excluded"])


def test_the_figures_fall_within_the_band(points):
    errors = sorted(abs(p.error) for p in points)
    within = sum(e <= ERROR_BAND for e in errors)
    assert within >= 0.8 * len(errors), [(p.run.id, p.metric, round(p.error, 3)) for p in points]
    assert errors[-1] <= 2 * ERROR_BAND, [(p.run.id, p.metric, round(p.error, 3)) for p in points
                                          if abs(p.error) > 2 * ERROR_BAND]
    # not biased one way: the median signed error is small
    signed = sorted(p.error for p in points)
    assert abs(signed[len(signed) // 2]) <= 0.10


def test_the_fitted_constants_are_physical():
    s = serving_sizing
    assert 0.6 <= s.ETA_HBM <= 0.9  # STREAM-like reads reach 80-90% of HBM's peak
    assert 0.2 <= s.ETA_MM <= 0.8
    assert 0 <= s.STEP_S <= 5e-3 and 5e-6 <= s.ALLREDUCE_S <= 50e-6
    assert 0 < s.ETA_MOE <= 1 and 0 <= s.FP8_GAIN <= 1


def test_docs_list_every_run_with_its_error(points):
    doc = (ROOT / "docs" / "serving.md").read_text()
    section = doc[doc.index("## Calibration"):]
    for p in points:
        assert f"`{p.run.id}`" in section, p.run.id
    for e in calibration.excluded():
        assert e["why"][:40] in section

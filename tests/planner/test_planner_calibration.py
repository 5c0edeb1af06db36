"""The planner on the published runs of data/calibration.json: the throughput it predicts for each published layout,
whether the tie group it reports holds that layout, and whether its pick claims more than the run achieved."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fmcluster.planner import calibration
from fmcluster.planner.models import DATA
from fmcluster.planner.ties import ERROR_BAND

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results():
    return calibration.results()


def test_the_table_holds_at_least_12_published_runs_each_with_its_source():
    raw = json.loads((DATA / "calibration.json").read_text())
    runs = raw["runs"]
    assert len(runs) >= 12 and len({r["id"] for r in runs}) == len(runs)
    for r in runs:
        assert r["source"]["url"].startswith("https://") and len(r["source"]["where"]) > 20, r["id"]
        assert r["published"]["value"] > 0 and r["published"]["unit"], r["id"]
        assert {"tp", "cp", "pp", "vp", "dp", "ep"} <= set(r["layout"]) and r["global_batch"] > 0, r["id"]
        assert r["precision"] in ("bf16", "fp8") and r["framework"] in ("megatron", "fsdp", "deepspeed"), r["id"]
    assert all(e["why"] for e in raw["excluded"])
    # a table of one framework or one model would not calibrate the others
    assert {r["framework"] for r in runs} >= {"megatron", "fsdp"} and len({r["model"] for r in runs}) >= 6


def test_units_convert_as_published():
    runs = {r.id: r for r in calibration.runs()}
    # Llama 3 Table 4: 430 TFLOPs/GPU over 6N plus causal attention for 405B at 8K
    assert runs["llama3-405b-8k-8192gpu"].measured == pytest.approx(170.4, abs=0.1)
    # dgxc-benchmarking: 85,459 tokens/s on 8 GPUs
    assert runs["nemo-llama3.1-8b-bf16-8gpu"].measured == pytest.approx(85459 / 8)
    # DeepSeek-V3: 14.8T tokens in 2.664M GPU-hours
    assert runs["deepseek-v3-2048gpu"].measured == pytest.approx(14.8e12 / 2.664e6 / 3600)


def test_predicted_throughput_on_the_published_layouts(results):
    errors = sorted(abs(r.error) for r in results)
    within = sum(e <= 0.15 for e in errors) / len(errors)
    assert within >= 0.8, [(r.run.id, round(r.error, 3)) for r in results]
    assert errors[-1] <= 0.30, [(r.run.id, round(r.error, 3)) for r in results if abs(r.error) > 0.3]
    # the tie groups' band is the calibration's: 80% of the runs within it
    assert errors[int(0.8 * len(errors)) - 1] <= ERROR_BAND


def test_the_published_layout_is_in_the_tie_group_or_one_step_from_it(results):
    for r in results:
        assert r.ties is not None, r.run.id
        assert r.in_ties or r.one_step(), (r.run.id, r.published.layout.key(), [c.layout.key() for c in r.ties.members])


def test_no_pick_claims_more_than_1_2x_what_was_published_for_its_model_and_hardware(results):
    """The pick's estimate against the best throughput published for the same model, sequence, GPU and precision: a
    run that left a bubble on the table (torchtitan's 405B, one micro-batch per pipeline rank by default) does not
    make an honest pick look like an over-claim, and a pick faster than anything published would."""
    best = {}
    for r in results:
        key = (r.run.model.name, r.run.model.seq, r.run.hw.gpu, r.run.hw.precision)
        best[key] = max(best.get(key, 0.0), r.run.measured)
    for r in results:
        pick = r.ties.pick
        claimed = pick.step.tokens / pick.estimate.seconds / r.run.hw.gpus
        key = (r.run.model.name, r.run.model.seq, r.run.hw.gpu, r.run.hw.precision)
        assert claimed <= 1.2 * best[key], (r.run.id, pick.layout.key(), claimed / best[key])


def test_docs_list_every_run_of_the_table():
    doc = (ROOT / "docs" / "planning.md").read_text()
    section = doc[doc.index("## Calibration"):]
    for run in calibration.runs():
        assert f"`{run.id}`" in section, run.id
    assert re.search(r"within ±15%: \d+ of \d+", section)

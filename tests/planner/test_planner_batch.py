"""Honest batch: every data-parallel rank runs at least one micro-batch, so a layout's step can carry more tokens than
requested; every output shows the tokens per step and says so when they differ."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.planner import spec

from fmcluster.planner.cli import main
from fmcluster.planner.models import preset
from fmcluster.planner.report import PlanOptions, build
from fmcluster.planner.text import render

DEFAULT = str(Path(__file__).resolve().parents[2] / "examples" / "default.yaml")


def test_a_tiny_request_runs_one_sequence_per_rank_and_says_so():
    report = build(spec("p5.48xlarge", 2), preset("llama3-8b"), PlanOptions(global_batch_tokens=100))
    job = report["jobs"][0]
    best = job["best"][0]["layout"]
    assert best["tokens_per_step"] == best["dp"] * 8192 and best["tokens_per_step"] > 100
    assert best["batch_warning"].startswith(f"runs {best['tokens_per_step']:,} tokens per step")
    assert job["warnings"] and all(r["batch_differs"] for r in job["layouts"])
    text = render(report)
    assert f"{best['tokens_per_step']:,} tokens per step" in text and "WARNING: runs" in text


def test_layouts_that_keep_the_batch_rank_before_those_that_grow_it():
    """Llama 3.1 405B on 2,048 p5.48xlarge (16,384 H100) at 16M tokens with ZeRO-3: 2,048 sequences of 8K cannot feed
    more than 2,048 data-parallel ranks; wider layouts run up to 8x the batch and rank after every layout that keeps
    it."""
    report = build(spec("p5.48xlarge", 2048), preset("llama3-405b"),
                   PlanOptions(global_batch_tokens=16 * 2**20, framework="deepspeed"))
    job = report["jobs"][0]
    fitting = [r for r in job["layouts"] if r["fits"]]
    kept = [r["tokens_per_step"] <= 1.25 * 16 * 2**20 for r in fitting]
    assert kept[0] and kept == sorted(kept, reverse=True) and not all(kept)
    assert job["best"][0]["layout"]["tokens_per_step"] == 16 * 2**20


def test_json_and_html_show_tokens_per_step(capsys, tmp_path):
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--global-batch-tokens", "1M", "--json"]) == 0
    job = json.loads(capsys.readouterr().out)["jobs"][0]
    assert job["requested_tokens_per_step"] == 1e6 and all("tokens_per_step" in r for r in job["layouts"])
    assert job["warnings"]  # 1,000,000 is not a whole number of 8K sequences
    out = tmp_path / "p.html"
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--global-batch-tokens", "1M", "--html", str(out)]) == 0
    html = out.read_text()
    assert html.count("tokens per step") >= 2 and "runs 1,0" in html


def test_a_layout_with_one_data_parallel_rank_is_not_called_ddp():
    report = build(spec("p5.48xlarge", 4), preset("llama3-70b"), PlanOptions(global_batch_tokens=2**20, top=100))
    rows = [r for r in report["jobs"][0]["layouts"] if r["dp"] * r["cp"] == 1]
    assert rows and all(r["sharding"] == "none" for r in rows)
    text = render(report)
    assert "dp=1, no data parallelism" in text and "dp=1, Megatron DDP" not in text

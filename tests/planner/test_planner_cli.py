"""The planner's commands through a test-only argparse harness and through `python -m fmcluster.planner.cli`."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.planner import figures

from fmcluster.planner.cli import PlanUsageError, add_diagram_arguments, add_plan_arguments, main, run_diagram, run_plan
from fmcluster.spec import SpecError

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = str(ROOT / "examples" / "default.yaml")


def harness() -> argparse.ArgumentParser:
    """What the main CLI does: one subparser per command, wired with the planner's functions."""
    p = argparse.ArgumentParser(prog="fmcluster")
    sub = p.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan")
    add_plan_arguments(plan)
    plan.set_defaults(func=run_plan)
    diagram = sub.add_parser("diagram")
    add_diagram_arguments(diagram)
    diagram.set_defaults(func=run_diagram)
    return p


def run(argv, capsys):
    args = harness().parse_args(argv)
    rc = args.func(args)
    return rc, capsys.readouterr().out


def test_plan_without_a_model_prints_the_cluster_and_cost(capsys):
    rc, out = run(["plan", DEFAULT], capsys)
    assert rc == 0 and out.startswith("cluster fm-dev: 2 nodes, 16 GPUs")
    # 2 x p5 and the NAT gateway; FSx is not priced (docs/planning.md, "Prices not found")
    assert "ring all-reduce of 14 GB" in out and "cost: $110.13/h ($80,395 a month of 730 h)" in out
    assert "  not in the total: FSx for Lustre" in out and "  not included: " in out


def test_text_shows_per_layout_tokens_estimate_bound_and_the_framework(capsys):
    rc, out = run(["plan", DEFAULT, "--model", "llama3-8b"], capsys)
    listed = [ln for ln in out.splitlines() if re.match(r"^    \d\. ", ln)]
    assert rc == 0 and listed and all("tokens per step" in ln and "estimated (MFU" in ln and "bound" in ln
                                      for ln in listed)
    assert out.count("       estimate: compute") == len(listed)
    assert "framework megatron: Megatron-LM / NeMo (bf16 weights, fp32 gradients)" in out


def test_the_memory_a_layout_must_fit_is_said_the_same_way_in_the_head_and_each_layout(capsys):
    rc, out = run(["plan", DEFAULT, "--model", "llama3-8b"], capsys)
    head = re.search(r"layouts fit (\d+) usable GiB of 80 GiB HBM per GPU \(90%\)", out)
    assert rc == 0 and head, out
    listed = [ln for ln in out.splitlines() if re.match(r"^    \d\. ", ln)]
    assert listed and all(f" of {head.group(1)} usable GiB;" in ln for ln in listed)


def test_plan_json_every_figure_carries_formula_and_inputs(capsys):
    rc, out = run(["plan", DEFAULT, "--model", "llama3-8b", "--json"], capsys)
    report = json.loads(out)
    found = figures(report)
    assert len(found) > 40
    for path, f in found:
        assert f["formula"] and isinstance(f["inputs"], dict), path
    job = report["jobs"][0]
    assert job["fits"] and job["best"][0]["memory"]["fits"]
    assert report["cluster"]["formulas"] and job["columns"]


@pytest.mark.parametrize("argv, option", [
    (["--params", "0", "--layers", "32", "--hidden", "4096"], "--params: must be greater than 0"),
    (["--params=-7e9", "--layers", "32", "--hidden", "4096"], "--params: must be greater than 0"),
    (["--params", "8B", "--layers", "0", "--hidden", "4096"], "--layers: must be greater than 0"),
    (["--params", "8B", "--layers", "32"], "--hidden: required"),
    (["--params", "8B", "--layers", "32", "--hidden", "4096", "--experts", "8"], "--active-experts:"),
    (["--params", "8B", "--layers", "32", "--hidden", "4096", "--experts", "2", "--active-experts", "4"],
     "--active-experts: active_experts (4) exceeds experts (2)"),
    (["--model", "gpt-17"], "--model: 'gpt-17' is neither a preset nor a file"),
    (["--model", "llama3-8b", "--params", "8B"], "--params: give either --model or the explicit sizes"),
    (["--model", "llama3-8b", "--mfu", "1.5"], "--mfu: 1.5 is not a fraction"),
    (["--model", "llama3-8b", "--mfu", "40"], "--mfu: 40 is not a fraction: give the share of peak between 0 and 1"),
    (["--params", "-5B", "--layers", "32", "--hidden", "4096"], "--params: must be greater than 0"),
    (["--params", "-5e9", "--layers", "32", "--hidden", "4096"], "--params: must be greater than 0"),
    (["--params", "8B", "--layers", "32", "--hidden", "4096", "--heads", "96"], "--heads: 96 does not divide --hidden 4096"),
    (["--params", "8B", "--layers", "32", "--hidden", "4096", "--vocab", "0"], "--vocab: must be greater than 0"),
    (["--model", "llama3-8b", "--vocab", "32000"], "--vocab: give either --model or the explicit sizes"),
    (["--model", "llama3-8b", "--framework", "jax"], "--framework: 'jax' is not one of megatron, fsdp, deepspeed"),
    (["--model", "llama3-8b", "--mfu", "0"], "--mfu: must be greater than 0"),
    (["--model", "llama3-8b", "--tokens", "lots"], "--tokens: 'lots' is not a number"),
    (["--model", "llama3-8b", "--group", "nope"], "--group: no GPU node group named 'nope'"),
    (["--model", "llama3-8b", "--html", "/no/such/dir/p.html"], "--html /no/such/dir/p.html: /no/such/dir is not a"),
])
def test_bad_options_raise_a_usage_error_naming_the_option(argv, option):
    args = harness().parse_args(["plan", DEFAULT, *argv])
    with pytest.raises(PlanUsageError) as e:
        run_plan(args)
    assert str(e.value).startswith(option)
    assert isinstance(e.value, ValueError)


def test_a_model_that_fits_nowhere_names_the_overflowing_term_and_by_how_much():
    args = harness().parse_args(["plan", DEFAULT, "--model", "llama3-405b"])
    with pytest.raises(PlanUsageError) as e:
        run_plan(args)
    msg = str(e.value)
    assert msg.startswith("--model: llama3.1-405b (406B parameters) does not fit any layout of group gpu")
    assert "GiB over HBM" in msg and "the largest term is optimizer state" in msg
    args = harness().parse_args(["plan", DEFAULT, "--params", "2T", "--layers", "96", "--hidden", "16384"])
    with pytest.raises(PlanUsageError, match=r"^--params: .*optimizer state alone is [\d.]+ GiB, [\d.]+ GiB over"):
        run_plan(args)


def test_a_spec_error_propagates(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: X\n")
    args = harness().parse_args(["plan", str(bad), "--model", "llama3-8b"])
    with pytest.raises(SpecError):
        run_plan(args)


def test_model_file_and_seq_override(tmp_path, capsys):
    f = tmp_path / "tiny.yaml"
    f.write_text("layers: 16\nhidden: 2048\nheads: 16\nffn: 8192\nvocab: 32000\nseq: 2048\n")
    rc, out = run(["plan", DEFAULT, "--model", str(f), "--json"], capsys)
    m = json.loads(out)["model"]
    assert rc == 0 and m["name"] == "tiny" and m["params"] > 0 and "computed from the architecture" in m["assumptions"][0]
    rc, out = run(["plan", DEFAULT, "--model", "llama3-8b", "--seq", "4096", "--json"], capsys)
    assert json.loads(out)["model"]["seq"] == 4096
    f.write_text("params: 1.5B\nlayers: 16\nhidden: 2048\n")
    rc, out = run(["plan", DEFAULT, "--model", str(f), "--json"], capsys)
    assert json.loads(out)["model"]["params"] == 1.5e9
    f.write_text("layers: 16\nhidden: 2048\nwidth: 3\n")
    with pytest.raises(PlanUsageError, match=r"^--model .*tiny.yaml: unknown key\(s\) width"):
        run_plan(harness().parse_args(["plan", DEFAULT, "--model", str(f)]))


@pytest.mark.parametrize("line, words", [
    ("sources: 5", "'sources' must be a list of strings"),
    ("sources: null", "'sources' must be a list of strings"),
    ("sources: abc", "'sources' must be a list of strings"),
    ("notes: [a]", "'notes' must be a string"),
    ("params: .nan", "'params' must be a finite number greater than 0"),
    ("params: .inf", "'params' must be a finite number greater than 0"),
])
def test_a_malformed_model_file_is_a_usage_error(tmp_path, line, words):
    f = tmp_path / "m.yaml"
    f.write_text(f"layers: 16\nhidden: 2048\nffn: 8192\nvocab: 32000\n{line}\n")
    with pytest.raises(PlanUsageError, match=rf"^--model .*m.yaml: {words}"):
        run_plan(harness().parse_args(["plan", DEFAULT, "--model", str(f)]))


def test_vocab_with_explicit_sizes_and_what_is_left_out_without_it(capsys):
    base = ["plan", DEFAULT, "--params", "8B", "--layers", "32", "--hidden", "4096", "--json"]
    rc, out = run(base + ["--vocab", "128256"], capsys)
    report = json.loads(out)
    assert rc == 0 and report["model"]["vocab"] == 128256 and not any("vocab" in a for a in report["assumptions"])
    rc, out = run(base, capsys)
    (said,) = [a for a in json.loads(out)["assumptions"] if "vocab not given" in a]
    assert "counted as layer weights" in said and "logits" in said and "left out of activation memory" in said


def test_a_model_file_whose_heads_do_not_divide_hidden_is_refused(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("layers: 16\nhidden: 2048\nheads: 24\nffn: 8192\nvocab: 32000\n")
    with pytest.raises(PlanUsageError, match=r"'heads' \(24\) does not divide 'hidden' \(2048\)"):
        run_plan(harness().parse_args(["plan", DEFAULT, "--model", str(f)]))
    f.write_text("layers: 16\nhidden: 2048\nheads: 24\nhead_dim: 128\nffn: 8192\nvocab: 32000\n")
    run_plan(harness().parse_args(["plan", DEFAULT, "--model", str(f), "--json"]))


def test_human_output_never_uses_scientific_notation(capsys, tmp_path):
    """A 16,384-GPU cluster and a quadrillion tokens: large figures print as digits with separators."""
    big = tmp_path / "big.yaml"
    big.write_text("name: big\nregion: us-east-1\navailability_zone: us-east-1a\nnode_groups:\n"
                   "  - {name: gpu, instance_type: p5.48xlarge, count: 2048}\n")
    out_html = tmp_path / "p.html"
    assert main(["plan", str(big), "--model", "llama3-405b", "--tokens", "1000T", "--gradient-gb", "0.0001",
                 "--html", str(out_html)]) == 0
    text = capsys.readouterr().out
    assert "6,553,600 Gbps EFA" in text
    page = re.sub(r"<style>.*?</style>|<[^>]+>", " ", out_html.read_text(), flags=re.S)  # what a reader sees
    for shown in (text, page):
        assert not re.search(r"\d[eE][+-]?\d", shown), re.search(r".{40}\d[eE][+-]?\d.{20}", shown)


def test_main_refuses_bad_input_in_one_line_without_a_traceback(capsys):
    for argv in (["--params", "-5B", "--layers", "32", "--hidden", "4096"], ["--model", "llama3-8b", "--mfu", "40"],
                 ["--model", "llama3-8b", "--framework", "jax"]):
        assert main(["plan", DEFAULT, *argv]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_explicit_moe_sizes(capsys):
    rc, out = run(["plan", DEFAULT, "--params", "47B", "--layers", "32", "--hidden", "4096", "--experts", "8",
                   "--active-experts", "2", "--seq", "4096", "--json"], capsys)
    report = json.loads(out)
    assert rc == 0 and report["model"]["experts"] == 8 and report["model"]["active_params"] < 47e9
    assert any("expert parameters estimated" in a for a in report["assumptions"])


def test_main_maps_usage_and_spec_errors_to_exit_2(capsys, tmp_path):
    assert main(["plan", DEFAULT, "--layers", "-1", "--params", "1B", "--hidden", "64"]) == 2
    assert capsys.readouterr().err.startswith("fmcluster: --layers: must be greater than 0")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: fm\n")
    assert main(["plan", str(bad)]) == 2
    assert "region: required" in capsys.readouterr().err


def test_subprocess_never_imports_aws_cdk_and_exits_2_on_bad_input():
    code = ("import sys, io, contextlib\n"
            "from fmcluster.planner.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['plan', {DEFAULT!r}, '--model', 'mixtral-8x7b', '--json'])\n"
            "assert rc == 0, rc\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'constructs', 'jsii', 'cdk_nag')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
    bad = subprocess.run([sys.executable, "-m", "fmcluster.planner.cli", "plan", DEFAULT, "--model", "nope"],
                         capture_output=True, text=True, cwd=ROOT, env=dict(os.environ))
    assert bad.returncode == 2 and bad.stderr.startswith("fmcluster: --model: 'nope'") and "Traceback" not in bad.stderr


def test_compute_runs_at_the_calibrated_rates_unless_mfu_replaces_them(capsys):
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["options"]["calibrated"] and report["options"]["mfu"] is None and report["calibration"]["used"]
    assert report["jobs"][0]["best"][0]["step"]["compute"]["inputs"]["calibrated"] is True
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--mfu", "0.5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert not report["options"]["calibrated"] and report["options"]["mfu"] == 0.5
    assert report["jobs"][0]["best"][0]["step"]["compute"]["inputs"]["mfu"] == 0.5
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--mfu", "0.5"]) == 0
    assert "0.5 of peak for every FLOP (--mfu, instead of the calibrated rates)" in capsys.readouterr().out

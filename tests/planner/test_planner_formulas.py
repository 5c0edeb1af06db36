"""What the JSON says a figure is, it is; layers divide by the pipeline unless the framework splits stages unevenly
(and then the layout names the flag); a precision the catalog has no peak for is one line."""

from __future__ import annotations

import ast
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.planner import figures, hardware

from fmcluster.planner import frameworks
from fmcluster.planner.cli import main
from fmcluster.planner.layouts import enumerate_layouts
from fmcluster.planner.models import preset
from fmcluster.planner.search import describe, evaluate

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = str(ROOT / "examples" / "default.yaml")
ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant, ast.Call, ast.Add, ast.Sub,
           ast.Mult, ast.Div, ast.Pow, ast.USub)


def arithmetic(formula: str, inputs: dict):
    """The formula as an expression over its inputs, or None when it is prose."""
    try:
        tree = ast.parse(formula, mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ALLOWED):
            return None
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in ("max", "min")):
            return None
        if isinstance(node, ast.Name) and node.id not in inputs and node.id not in ("max", "min"):
            return None
    return tree


def test_every_arithmetic_formula_in_the_json_is_the_formula_of_its_value(capsys):
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--json", "--layout", "tp=2,pp=2,vp=2"]) == 0
    report = json.loads(capsys.readouterr().out)
    checked = []
    for path, f in figures(report):
        tree = arithmetic(f["formula"], f["inputs"])
        if tree is None or not isinstance(f["value"], (int, float)):
            continue
        names = {k: v for k, v in f["inputs"].items() if isinstance(v, (int, float))}
        value = eval(compile(tree, path, "eval"), {"__builtins__": {}, "max": max, "min": min}, names)  # noqa: S307
        assert math.isclose(value, f["value"], rel_tol=1e-6, abs_tol=1e-9), (path, f["formula"], value, f["value"])
        checked.append(path)
    kinds = {p.rsplit(".", 1)[-1] for p in checked}
    assert {"flops_per_token", "compute", "gemm", "attention", "bubble", "bound", "seconds", "total", "activations",
            "mfu"} <= kinds, kinds
    assert any(".pinned." in p for p in checked)


def test_flops_per_token_prints_the_halved_causal_term_it_uses(capsys):
    """6N + 12 L h s was printed while the value used the causal half: 6N + 6 L h s for standard heads."""
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["jobs"][0]["best"][0]["step"]["flops_per_token"]
    assert "12 L h s" not in f["formula"] and "3 * L * s * a * (d_qk + d_v)" in f["formula"]
    i = f["inputs"]
    assert i["a"] * (i["d_qk"] + i["d_v"]) == 2 * 4096  # 3 L s a (d_qk + d_v) = 6 L h s for standard heads
    assert f["value"] == pytest.approx((6 * i["N"] + 6 * i["L"] * 4096 * i["s"]) * i["recompute_factor"])


def test_layers_must_divide_by_pp_unless_the_framework_splits_stages_unevenly():
    """Llama 3.1 405B has 126 layers: pp = 4 or vp = 8 over pp = 8 do not divide them. A framework without an
    uneven-stage option gets only layouts that divide; Megatron's are kept and name --pipeline-model-parallel-layout."""
    m, hw = preset("llama3-405b"), hardware("p5.48xlarge", 128)
    even = enumerate_layouts(m, hw, 16 * 2**20, 1, uneven_ok=False)
    assert even and all(m.layers % lay.pp == 0 for lay in even)
    assert any(m.layers % lay.pp for lay in enumerate_layouts(m, hw, 16 * 2**20, 1))
    strict = replace(frameworks.MEGATRON, key="strict", uneven_stages="")
    frameworks.FRAMEWORKS["strict"] = strict
    try:
        fitting = [c for c in evaluate(m, hw, 16 * 2**20, 1, None, "strict") if c.fits]
        assert fitting and all(m.layers % (c.layout.pp * c.layout.vp) == 0 for c in fitting)
    finally:
        del frameworks.FRAMEWORKS["strict"]
    uneven = [c for c in evaluate(m, hw, 16 * 2**20, 1) if c.fits and c.uneven]
    assert uneven and all("uneven stages (--pipeline-model-parallel-layout)" in describe(c) for c in uneven)


@pytest.mark.parametrize("precision, words", [("fp4", "no FP4 dense peak for p5.48xlarge (H100)"),
                                              ("int8", "no INT8 dense peak")])
def test_a_precision_without_a_peak_is_one_line(capsys, precision, words):
    assert main(["plan", DEFAULT, "--model", "llama3-8b", "--precision", precision]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "usage:" not in err

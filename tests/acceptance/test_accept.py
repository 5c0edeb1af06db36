"""`fmcluster accept` on nccl-tests logs in the real format (fixtures/, each says where its format and values come
from): a healthy p5 run passes, a degraded EFA link fails per size, a truncated and a failed p5en run fail, bad
input exits 2 with the option at fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fmcluster.acceptance import nccl_output, references
from fmcluster.acceptance.bound import plan_bound
from fmcluster.cli import main
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
P5_SPEC = str(ROOT / "examples" / "pcs-p5.yaml")
P5EN_SPEC = str(ROOT / "examples" / "pcs-p5en-capacity-block.yaml")


def accept(capsys, *argv):
    code = main(["accept", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys, *argv):
    code, out, err = accept(capsys, *argv, "--json")
    return code, json.loads(out) if out else None, err


def test_the_published_two_node_p5_run_passes_at_every_judged_size(capsys):
    code, runs, _ = as_json(capsys, FIXTURES / "p5-2node-all_reduce.log", "--spec", P5_SPEC)
    assert code == 0
    (run,) = runs
    assert (run["collective"], run["nodes"], run["ranks"], run["verdict"]) == ("all_reduce", 2, 16, "pass")
    judged = [s for s in run["sizes"] if s["verdict"] != "info"]
    assert [s["bytes"] for s in judged][0] == 2**20, "judged from the first published size"
    assert all(s["verdict"] == "pass" for s in judged)
    small = next(s for s in run["sizes"] if s["bytes"] == 8)
    assert small["verdict"] == "info" and "not judged" in small["reasons"][0]


def test_a_degraded_efa_link_fails_the_sizes_that_cross_it_and_names_the_share(capsys):
    code, out, _ = accept(capsys, FIXTURES / "p5-4node-degraded-efa.log", "--spec", P5_SPEC)
    assert code == 1
    assert "all_reduce on 4 x p5.48xlarge (32 ranks): FAIL" in out
    assert "alltoall on 4 x p5.48xlarge (32 ranks): PASS" in out
    code, runs, _ = as_json(capsys, FIXTURES / "p5-4node-degraded-efa.log", "--spec", P5_SPEC)
    verdicts = {s["bytes"] >> 20: s["verdict"] for s in runs[0]["sizes"]}
    assert verdicts[32] == "pass" and verdicts[256] == "warn" and verdicts[8192] == "fail"
    assert any("of published" in r for r in runs[0]["sizes"][-1]["reasons"])


def test_a_truncated_run_fails_even_where_its_sizes_pass(capsys):
    code, runs, _ = as_json(capsys, FIXTURES / "p5en-2node-truncated.log", "--spec", P5EN_SPEC)
    assert code == 1
    (run,) = runs
    assert run["verdict"] == "fail" and run["published_source"] is None, "no public p5en result"
    assert "incomplete" in run["problems"][0] and "1073741824" in run["problems"][0]
    assert run["sizes"][-1]["verdict"] == "pass", "1 GiB itself beat the plan"


def test_a_failed_run_fails_with_the_nccl_error(capsys):
    code, out, _ = accept(capsys, FIXTURES / "p5en-2node-failed.log", "--spec", P5EN_SPEC)
    assert code == 1
    assert "alltoall on 2 x p5en.48xlarge (16 ranks): FAIL" in out
    assert "Test NCCL failure common.cu:1204 'remote process exited or there was a network error" in out


def test_warnings_pass_unless_strict(capsys, tmp_path):
    text = (FIXTURES / "p5-2node-all_reduce.log").read_text()
    slow = tmp_path / "slow.log"  # 1 GiB and up at 70 % of the published values: warn, not fail
    lines = []
    for line in text.splitlines():
        tokens = line.split()
        if len(tokens) == 14 and tokens[1].isdigit() and int(tokens[1]) >= 2**30:
            tokens[8] = tokens[12] = f"{float(tokens[8]) * 0.7:.2f}"
            line = " ".join(tokens)
        lines.append(line)
    slow.write_text("\n".join(lines) + "\n")
    assert accept(capsys, slow, "--instance-type", "p5.48xlarge")[0] == 0
    code, out, _ = accept(capsys, slow, "--instance-type", "p5.48xlarge", "--strict")
    assert code == 1 and "WARN" in out and "plan: none" in out


def test_wrong_results_fail_the_size(capsys, tmp_path):
    bad = tmp_path / "wrong.log"
    lines = (FIXTURES / "p5-2node-all_reduce.log").read_text().splitlines()
    for i, line in enumerate(lines):
        tokens = line.split()
        if len(tokens) == 14 and tokens[1] == str(2**30):
            tokens[9] = "3"  # out-of-place #wrong
            lines[i] = " ".join(tokens)
    bad.write_text("\n".join(lines) + "\n")
    code, runs, _ = as_json(capsys, bad, "--spec", P5_SPEC)
    size = next(s for s in runs[0]["sizes"] if s["bytes"] == 2**30)
    assert code == 1 and size["verdict"] == "fail" and "wrong result" in size["reasons"][0]


@pytest.mark.parametrize("argv, message", [
    (["/nonexistent.log", "--instance-type", "p5.48xlarge"], "LOG: cannot read /nonexistent.log"),
    ([str(ROOT / "README.md"), "--instance-type", "p5.48xlarge"], "no nccl-tests run found"),
    ([str(FIXTURES / "p5-2node-all_reduce.log")], "--spec: give the cluster spec"),
    ([str(FIXTURES / "p5-2node-all_reduce.log"), "--spec", P5_SPEC, "--group", "login"], "--group: 'login'"),
    ([str(FIXTURES / "p5-2node-all_reduce.log"), "--instance-type", "p5.48xlarge", "--warn-below", "lots"],
     "--warn-below: 'lots' is not a number"),
    ([str(FIXTURES / "p5-2node-all_reduce.log"), "--instance-type", "p5.48xlarge", "--fail-below", "0.9"],
     "--fail-below: must not exceed --warn-below"),
    ([str(FIXTURES / "p5-2node-all_reduce.log"), "--instance-type", "p5.48xlarge", "--nodes", "3"],
     "--nodes: 3, but run 1 lists ranks on 2 host(s)"),
    ([str(FIXTURES / "p5-2node-all_reduce.log"), "--spec", P5_SPEC, "--instance-type", "p5en.48xlarge"],
     "--instance-type: p5en.48xlarge differs"),
])
def test_bad_input_exits_2_naming_the_option(capsys, argv, message):
    code, out, err = accept(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err


def test_a_log_that_does_not_name_its_collective_needs_the_option(capsys, tmp_path):
    bare = tmp_path / "bare.log"
    lines = (FIXTURES / "p5-4node-degraded-efa.log").read_text().splitlines()
    bare.write_text("\n".join(line for line in lines if "_perf" not in line and not line.startswith("# ")) + "\n")
    code, _, err = accept(capsys, bare, "--spec", P5_SPEC)
    assert code == 2 and "--collective: run 1" in err
    code, runs, _ = as_json(capsys, bare, "--spec", P5_SPEC, "--collective", "alltoall")
    assert {r["collective"] for r in runs} == {"alltoall"}


def test_the_parser_reads_launcher_prefixes_old_columns_and_ranks():
    (run,) = nccl_output.parse((FIXTURES / "p5-2node-all_reduce.log").read_text())
    assert run.collective == "all_reduce" and len(run.ranks) == 16 and len(run.hosts) == 2
    assert run.device == "NVIDIA H100 80GB HBM3" and run.complete and run.out_of_bounds == 0
    old = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
           "     1048576        262144   float     sum   1035.3    1.01    1.90  5e-07    643.4    1.63    3.06  5e-07\n")
    (run,) = nccl_output.parse(old, collective="all_reduce")
    assert run.rows[0].size == 1048576 and run.rows[0].busbw == 1.90 and run.rows[0].wrong == 0


def test_the_plan_bound_is_the_planners_hierarchical_all_reduce():
    """2 x p5: NVLink ring of 8 at 450 GB/s one way, then the 2-node ring at 50 GB/s of EFA per GPU on 1/8 of the
    buffer; busbw = 2(n-1)/n x size / the two added."""
    (group,) = load_spec(P5_SPEC).gpu_groups
    size = 1.0
    seconds = 2 * 7 / 8 * size / 450 + 2 * 1 / 2 * (size / 8) / 50
    assert plan_bound(group, "all_reduce", 16).busbw_gbs == pytest.approx(2 * 15 / 16 * size / seconds)
    assert plan_bound(group, "alltoall", 16).busbw_gbs == pytest.approx(15 / 16 / (7 / 16 / 450 + 8 / 16 / 50))


def test_published_values_interpolate_between_sizes_and_stop_at_their_range():
    ref = references.reference("ml.p5.48xlarge", "alltoall", 2)
    assert ref is not None and references.at(ref, 32 * 2**20) == 44.79
    assert 44.79 < references.at(ref, 48 * 2**20) < 62.08
    assert references.at(ref, 2**20) is None and references.at(ref, 2**40) is None
    assert references.reference("p5en.48xlarge", "all_reduce", 2) is None
    assert references.reference("p5.48xlarge", "all_reduce", 3) is None

"""`fmcluster accept` on nccl-tests logs in the real format (fixtures/, each says where its format and values come
from): a healthy p5 run passes, a degraded EFA link fails per size, a truncated, a failed and a timed-out run fail
with the real reason, every output form nccl-tests prints is read, a result above the physical limit is suspect,
the log's hosts and ranks shape the model, the group's untested nodes are said, bad input exits 2 with the option
at fault."""

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
P5_SPEC = str(ROOT / "examples" / "pcs-p5.yaml")  # group h100: 4 x p5.48xlarge
P5EN_SPEC = str(ROOT / "examples" / "pcs-p5en-capacity-block.yaml")
P5_RUN = FIXTURES / "p5-2node-all_reduce.log"


def accept(capsys, *argv):
    code = main(["accept", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys, *argv):
    code, out, err = accept(capsys, *argv, "--json")
    return code, json.loads(out) if out else None, err


def scaled(tmp_path: Path, source: Path, share: float, name: str = "scaled.log") -> Path:
    """`source` with every busbw and algbw multiplied by `share` (a fabric at that share of its speed)."""
    lines = []
    for line in source.read_text().splitlines():
        words = line.split()
        if len(words) == 14 and words[1].isdigit():  # the AWS sample's srun label, then 13 columns
            for i in (7, 8, 11, 12):
                words[i] = f"{float(words[i]) * share:.2f}"
            line = " ".join(words)
        lines.append(line)
    out = tmp_path / name
    out.write_text("\n".join(lines) + "\n")
    return out


def test_the_published_two_node_p5_run_passes_at_every_judged_size(capsys):
    code, doc, _ = as_json(capsys, P5_RUN, "--spec", P5_SPEC)
    assert code == 0 and doc["verdict"] == "warn", "2 of the group's 4 nodes tested"
    (run,) = doc["runs"]
    assert (run["collective"], run["nodes"], run["ranks"], run["verdict"]) == ("all_reduce", 2, 16, "pass")
    assert run["model"]["verdict"] == "pass" and run["model"]["peak_busbw_gbs"] == 487.09
    judged = [s for s in run["sizes"] if s["verdict"] != "info"]
    assert [s["bytes"] for s in judged][0] == 2**20, "judged from the first published size"
    assert all(s["verdict"] == "pass" for s in judged)
    small = next(s for s in run["sizes"] if s["bytes"] == 8)
    assert small["verdict"] == "info" and small["reasons"] == []


def test_half_the_bandwidth_fails_where_the_plan_used_to_pass_it(tmp_path, capsys):
    """The plan's bound adds the NVLink and EFA phases that NCCL overlaps: AWS's healthy run measured 166 % of it,
    so the same run at 45 % still read 75 % of the plan (a warning, exit 0). The model fails it."""
    slow = scaled(tmp_path, P5_RUN, 0.45)
    code, doc, _ = as_json(capsys, slow, "--spec", P5_SPEC)
    (run,) = doc["runs"]
    assert code == 1 and run["verdict"] == "fail" and run["model"]["verdict"] == "fail"
    assert run["plan_busbw_gbs"] < 300 < run["model"]["expected_busbw_gbs"]


def test_a_degraded_efa_link_fails_the_sizes_that_cross_it_and_names_the_share(capsys):
    code, out, _ = accept(capsys, FIXTURES / "p5-4node-degraded-efa.log", "--spec", P5_SPEC)
    assert code == 1
    hosts = "hosts p5-st-gpu-1, p5-st-gpu-2, p5-st-gpu-3, p5-st-gpu-4"
    assert f"all_reduce on 4 x p5.48xlarge (32 ranks, {hosts}): FAIL" in out
    assert f"alltoall on 4 x p5.48xlarge (32 ranks, {hosts}): PASS" in out
    assert "coverage: 4 of 4 node(s) of group h100 tested" in out
    code, doc, _ = as_json(capsys, FIXTURES / "p5-4node-degraded-efa.log", "--spec", P5_SPEC)
    verdicts = {s["bytes"] >> 20: s["verdict"] for s in doc["runs"][0]["sizes"]}
    assert verdicts[32] == "pass" and verdicts[256] == "warn" and verdicts[8192] == "fail"
    assert any("of published" in r for r in doc["runs"][0]["sizes"][-1]["reasons"])
    assert doc["runs"][0]["model"]["verdict"] == "fail"


def test_a_truncated_run_fails_even_where_its_sizes_pass(capsys):
    code, doc, _ = as_json(capsys, FIXTURES / "p5en-2node-truncated.log", "--spec", P5EN_SPEC)
    assert code == 1
    (run,) = doc["runs"]
    assert run["verdict"] == "fail" and run["published_source"] is None, "no public p5en result"
    assert "incomplete" in run["problems"][0] and "1073741824" in run["problems"][0]
    assert run["model"]["verdict"] == "pass", "1 GiB itself reached the model"


def test_a_failed_run_fails_with_the_nccl_error(capsys):
    code, out, _ = accept(capsys, FIXTURES / "p5en-2node-failed.log", "--spec", P5EN_SPEC)
    assert code == 1
    assert "alltoall on 2 x p5en.48xlarge (16 ranks" in out and "): FAIL" in out
    assert "Test NCCL failure common.cu:1204 'remote process exited or there was a network error" in out


def test_a_run_nccl_tests_timed_out_fails_with_the_timeout(capsys):
    code, doc, _ = as_json(capsys, FIXTURES / "p5en-2node-timeout.log", "--instance-type", "p5en.48xlarge")
    (run,) = doc["runs"]
    assert code == 1 and run["verdict"] == "fail"
    assert run["problems"][0] == "the run failed: ip-10-4-31-77: Test timeout (600s) common.cu:523"


@pytest.mark.parametrize("fixture, what", [
    ("p5-2node-all_reduce-timestamps.log", "-S 1: the time of day ends each line"),
    ("p5-2node-all_reduce-per-iteration.log", "-I 1: i_min i_max i_p99 i_cv% after each #wrong"),
    ("p5-2node-all_reduce-unchecked-cputime.log", "-c 0 -C 1 -a 3: #wrong N/A, cputime"),
])
def test_every_output_form_of_nccl_tests_is_read_and_judged_alike(capsys, fixture, what):
    (plain,) = nccl_output.parse(P5_RUN.read_text())
    (run,) = nccl_output.parse((FIXTURES / fixture).read_text())
    assert not run.unread, what
    assert [(r.size, r.busbw) for r in run.rows] == [(r.size, r.busbw) for r in plain.rows], what
    assert run.complete and len(run.hosts) == 2 and run.ranks_per_host == 8
    code, doc, _ = as_json(capsys, FIXTURES / fixture, "--instance-type", "p5.48xlarge")
    assert code == 0 and doc["runs"][0]["verdict"] == "pass", what


def test_size_lines_that_cannot_be_read_fail_the_run_and_say_why(tmp_path, capsys):
    lines = P5_RUN.read_text().splitlines()
    odd = tmp_path / "odd.log"
    odd.write_text("\n".join(line + (" 7 7 7" if line.split()[1:2] == [str(2**30)] else "") for line in lines) + "\n")
    code, doc, _ = as_json(capsys, odd, "--instance-type", "p5.48xlarge")
    (run,) = doc["runs"]
    assert code == 1 and run["verdict"] == "fail"
    assert run["problems"][0].startswith("1 size line(s) could not be read, first '1073741824 ")
    assert "16 columns, expected 13 per the column header" in run["problems"][0]


def test_a_result_above_the_physical_limit_is_suspect_and_fails(tmp_path, capsys):
    """342 % of the plan's bound was accepted: 2 x p5 cannot move more than its EFA, 750 GB/s of busbw on 2 nodes."""
    fast = scaled(tmp_path, P5_RUN, 2.1)
    code, doc, _ = as_json(capsys, fast, "--instance-type", "p5.48xlarge")
    (run,) = doc["runs"]
    assert code == 1 and run["verdict"] == "fail"
    assert run["model"]["physical_limit_gbs"] == 750.0
    assert "above the physical limit of 750 GB/s" in run["problems"][0] and "suspect" in run["problems"][0]
    big = next(s for s in run["sizes"] if s["bytes"] == 2**34)
    assert big["suspect"] and big["verdict"] == "fail"


def test_the_model_reads_the_hosts_and_ranks_from_the_log(tmp_path, capsys):
    """2 hosts x 4 GPUs are two NVLink domains of 4 over EFA, not one domain of 8: half the node's EFA each."""
    lines = [line for line in P5_RUN.read_text().splitlines()
             if not any(f"device  {d} [" in line for d in (4, 5, 6, 7))]
    half = tmp_path / "2x4.log"
    half.write_text("\n".join(lines) + "\n")
    (run,) = nccl_output.parse(half.read_text())
    assert len(run.ranks) == 8 and run.hosts == ["ip-10-1-60-27", "ip-10-1-88-154"] and run.ranks_per_host == 4
    code, doc, _ = as_json(capsys, half, "--spec", P5_SPEC)
    model = doc["runs"][0]["model"]
    assert (doc["runs"][0]["ranks"], model["nvlink_domains"], model["ranks_per_domain"], model["bound_by"]) == \
        (8, 2, 4, "EFA")
    (group,) = load_spec(P5_SPEC).gpu_groups
    assert plan_bound(group, "all_reduce", 8, 4).per_domain == 4
    assert plan_bound(group, "all_reduce", 8).per_domain == 8, "without the hosts, one domain"


def test_the_groups_untested_nodes_are_said_and_fail_strict(capsys):
    code, out, _ = accept(capsys, P5_RUN, "--spec", P5_SPEC)
    assert code == 0
    assert "coverage: 2 of 4 node(s) of group h100 tested" in out
    assert f"2 node(s) not tested: `fmcluster job nccl {P5_SPEC} --group h100 --cover pairs`" in out
    assert accept(capsys, P5_RUN, "--spec", P5_SPEC, "--strict")[0] == 1


def test_pairs_name_the_host_every_run_of_which_failed(tmp_path, capsys):
    """--cover pairs over 4 hosts: (a,b) (c,d) then (b,c) (d,a); d's link runs at half speed."""
    text = P5_RUN.read_text()
    good = text
    slow = scaled(tmp_path, P5_RUN, 0.5).read_text()
    runs = []
    for x, y in (("a", "b"), ("c", "d"), ("b", "c"), ("d", "a")):
        body = slow if "d" in (x, y) else good
        runs.append(f"== fmcluster nccl-tests: all_reduce_perf on 2 node(s): {x} {y} ==\n" +
                    body.replace("ip-10-1-60-27", x).replace("ip-10-1-88-154", y))
    log = tmp_path / "pairs.log"
    log.write_text("\n".join(runs))
    code, doc, _ = as_json(capsys, log, "--spec", P5_SPEC)
    assert code == 1 and [r["verdict"] for r in doc["runs"]] == ["pass", "fail", "pass", "fail"]
    assert doc["coverage"] == {"group": "h100", "group_nodes": 4, "tested": 4, "hosts": ["a", "b", "c", "d"],
                               "complete": True, "suspect_hosts": ["d"]}
    assert "suspect host(s): d (every run on it failed" in accept(capsys, log, "--spec", P5_SPEC)[1]


def test_warnings_pass_unless_strict(capsys, tmp_path):
    slow = tmp_path / "slow.log"  # 1 GiB and up at 70 % of the published values: warn, not fail
    lines = []
    for line in P5_RUN.read_text().splitlines():
        words = line.split()
        if len(words) == 14 and words[1].isdigit() and int(words[1]) >= 2**30:
            words[8] = words[12] = f"{float(words[8]) * 0.7:.2f}"
            line = " ".join(words)
        lines.append(line)
    slow.write_text("\n".join(lines) + "\n")
    assert accept(capsys, slow, "--instance-type", "p5.48xlarge")[0] == 0
    code, out, _ = accept(capsys, slow, "--instance-type", "p5.48xlarge", "--strict")
    assert code == 1 and "WARN" in out and "plan:" not in out and "coverage" not in out


def test_wrong_results_fail_the_size(capsys, tmp_path):
    bad = tmp_path / "wrong.log"
    lines = P5_RUN.read_text().splitlines()
    for i, line in enumerate(lines):
        words = line.split()
        if len(words) == 14 and words[1] == str(2**30):
            words[9] = "3"  # out-of-place #wrong
            lines[i] = " ".join(words)
    bad.write_text("\n".join(lines) + "\n")
    code, doc, _ = as_json(capsys, bad, "--spec", P5_SPEC)
    size = next(s for s in doc["runs"][0]["sizes"] if s["bytes"] == 2**30)
    assert code == 1 and size["verdict"] == "fail" and "wrong result" in size["reasons"][0]


@pytest.mark.parametrize("argv, message", [
    (["/nonexistent.log", "--instance-type", "p5.48xlarge"], "LOG: cannot read /nonexistent.log"),
    ([str(ROOT / "README.md"), "--instance-type", "p5.48xlarge"], "no nccl-tests run found"),
    ([str(P5_RUN)], "--spec: give the cluster spec"),
    ([str(P5_RUN), "--spec", P5_SPEC, "--group", "login"], "--group: 'login'"),
    ([str(P5_RUN), "--instance-type", "p5.48xlarge", "--warn-below", "lots"], "--warn-below: 'lots' is not a number"),
    ([str(P5_RUN), "--instance-type", "p5.48xlarge", "--fail-below", "0.9"], "--fail-below: must not exceed --warn-below"),
    ([str(P5_RUN), "--instance-type", "p5.48xlarge", "--nodes", "3"], "--nodes: 3, but run 1 lists ranks on 2 host(s)"),
    ([str(P5_RUN), "--spec", P5_SPEC, "--instance-type", "p5en.48xlarge"], "--instance-type: p5en.48xlarge differs"),
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
    code, doc, _ = as_json(capsys, bare, "--spec", P5_SPEC, "--collective", "alltoall")
    assert {r["collective"] for r in doc["runs"]} == {"alltoall"}


def test_the_parser_reads_launcher_prefixes_old_columns_and_ranks():
    (run,) = nccl_output.parse(P5_RUN.read_text())
    assert run.collective == "all_reduce" and len(run.ranks) == 16 and len(run.hosts) == 2
    assert run.device == "NVIDIA H100 80GB HBM3" and run.complete and run.out_of_bounds == 0
    old = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
           "     1048576        262144   float     sum   1035.3    1.01    1.90  5e-07    643.4    1.63    3.06  5e-07\n")
    (run,) = nccl_output.parse(old, collective="all_reduce")
    assert run.rows[0].size == 1048576 and run.rows[0].busbw == 1.90 and run.rows[0].wrong == 0, "error, not #wrong"
    many = old.replace("5e-07", "1e+06")  # %g of a million wrong elements, where #wrong is the column's name
    header = "#       size         count      type   redop     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    (run,) = nccl_output.parse(many.replace("validation: 1\n", "validation: 1\n" + header), collective="all_reduce")
    assert run.rows[0].wrong == 2_000_000


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

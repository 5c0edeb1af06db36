"""`fmcluster plan-rules`: the plan's bound as recording rules promtool accepts, the same figures `fmcluster plan
--json` prints, the names the job dashboard reads; bad input exits 2 and writes nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fmcluster import observability as obs
from fmcluster.acceptance import plan_rules
from fmcluster.cli import main
from fmcluster.observability import metrics

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "examples" / "pcs-p5.yaml")


def test_the_rules_carry_the_plans_figures_and_pass_promtool(tmp_path, capsys):
    out = tmp_path / "plan-rules.yaml"
    assert main(["plan-rules", SPEC, "--model", "llama3-70b", "--out", str(out)]) == 0
    assert main(["plan", SPEC, "--model", "llama3-70b", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    best = plan["jobs"][0]["best"][0]
    rules = {r["record"]: r for r in yaml.safe_load(out.read_text())["groups"][0]["rules"]}
    assert set(rules) == set(plan_rules.RECORDS)
    bound = rules[plan_rules.TOKENS_BOUND]
    assert float(bound["expr"][len("vector("):-1]) == pytest.approx(best["step"]["tokens_per_s"]["value"], rel=1e-5)
    assert bound["labels"] == {"cluster": "pcs-p5", "node_group": "h100", "model": plan["model"]["name"],
                               "layout": best["layout"]["description"]}
    # the MFU the plan expects of its pick at the calibrated rates (not a fixed 0.4 the plan no longer uses)
    mfu = float(rules[plan_rules.MFU]["expr"][len("vector("):-1])
    assert mfu == pytest.approx(best["estimate"]["mfu"]["value"], rel=1e-5) and 0.2 < mfu < 0.7
    assert rules[plan_rules.GPUS]["expr"] == "vector(32)"
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: make setup installs it"
    r = subprocess.run([promtool, "check", "rules", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_job_dashboard_reads_the_plan_and_the_job_rules():
    queries = " ".join(obs.dashboard_queries(obs.dashboards()["job"]))
    used = metrics.metric_names(queries)
    assert set(plan_rules.RECORDS) - {plan_rules.GPUS} <= used
    assert {"fmcluster:job_tensor_active:avg", "fmcluster:job_node_tensor_active:avg", "fmcluster_job_tokens_total"} <= used


@pytest.mark.parametrize("argv, message", [
    ([SPEC], "--model: plan-rules needs a model"),
    ([SPEC, "--model", "llama3-70b", "--mfu", "2"], "--mfu: must be at most 1"),
    ([SPEC, "--model", "llama3-70b", "--out", "/nonexistent/dir/x.yaml"],
     "--out /nonexistent/dir/x.yaml: /nonexistent/dir is not a directory"),
])
def test_bad_input_exits_2(capsys, argv, message):
    assert main(["plan-rules", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err

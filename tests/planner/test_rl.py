"""`fmcluster plan --rl`: the RL step model against the published runs it is calibrated on (the band docs/
post-training.md states), what it says of mixture-of-experts runs (a lower bound), that its terms move the way the
physics says, and the command itself."""

from __future__ import annotations

import dataclasses

import pytest

from fmcluster.cli import main
from fmcluster.planner import rl

BAND = 0.15  # docs/post-training.md, "Calibration": every dense run within 15%


def test_at_least_four_published_runs_each_with_its_source():
    runs = rl.calibration_runs()
    assert len(runs) >= 4
    assert all(r["source"]["url"].startswith("https://") and r["source"]["where"] for r in runs)


@pytest.mark.parametrize("row", [r for r in rl.calibration() if r["set"] == "dense"], ids=lambda r: r["id"])
def test_every_dense_run_is_within_the_band(row):
    assert abs(row["error"]) <= BAND, row


@pytest.mark.parametrize("row", [r for r in rl.calibration() if r["set"] == "moe"], ids=lambda r: r["id"])
def test_for_moe_runs_the_step_is_a_lower_bound(row):
    assert row["predicted_s"] < row["measured_s"], row


def _job(**kw):
    base = dict(model=rl.model("qwen2.5-7b"), samples=2048, prompt=256, response_mean=1024, response_max=4096,
                rollout_tp=1)
    return rl.Job(**{**base, **kw})


def _gpus(count):
    from fmcluster import catalog

    return rl.Gpus.of(catalog.get("p5.48xlarge"), count)


def test_the_terms_move_as_the_work_does():
    job = _job()
    assert rl.rollout_seconds(job, _gpus(32)) < rl.rollout_seconds(job, _gpus(16))
    assert rl.rollout_seconds(_job(response_mean=2048), _gpus(16)) > rl.rollout_seconds(job, _gpus(16))
    assert rl.train_seconds(_job(algorithm="ppo"), _gpus(16)) > rl.train_seconds(job, _gpus(16))
    # the rollout's decode streams the weight shard once a step: a tensor-parallel shard reads less per GPU
    assert rl.colocated(job, _gpus(16)).sync_s > rl.colocated(_job(rollout_tp=4), _gpus(16)).sync_s


def test_memory_has_a_critic_only_for_ppo_and_shards_states_over_the_training_gpus():
    grpo = rl.memory_gib(_job(), _gpus(16), 16, "colocated")
    ppo = rl.memory_gib(_job(algorithm="ppo"), _gpus(16), 16, "colocated")
    assert grpo["critic_states"] == 0 and ppo["critic_states"] == grpo["actor_states"] > 0
    assert rl.memory_gib(_job(), _gpus(32), 32, "colocated")["actor_states"] < grpo["actor_states"]


def test_a_split_overlaps_the_sides_and_a_weight_shard_that_fits_no_engine_is_refused():
    job = _job()
    for s in rl.splits(job, _gpus(32)):
        assert s.step_s == pytest.approx(max(s.rollout_s, s.train_s) + s.sync_s)
        assert s.rollout_gpus + s.train_gpus == 32
    big = _job(model=rl.model("qwen3-235b-a22b"), rollout_tp=1)
    assert rl.rollout_seconds(big, _gpus(32)) == float("inf")


def test_plan_rl_prints_the_step_and_its_band(capsys):
    assert main(["plan", "examples/eks-p5.yaml", "--rl", "--model", "qwen2.5-7b", "--rollout-length", "2048"]) == 0
    out = capsys.readouterr().out
    assert "RL step (GRPO) of qwen2.5-7b" in out and "pick:" in out and "calibration: 4 published dense runs" in out
    assert main(["plan", "examples/eks-p5.yaml", "--rl", "--model", "qwen3-30b-a3b"]) == 0
    assert "read this step as a lower bound" in capsys.readouterr().out


@pytest.mark.parametrize("argv, says", [(["--prompts", "0"], "--prompts: "), (["--model", "nope"], "--model: "),
                                        (["--rollout-length", "x"], "--rollout-length: ")])
def test_bad_options_exit_2_naming_the_option(capsys, argv, says):
    assert main(["plan", "examples/eks-p5.yaml", "--rl", *argv]) == 2
    assert says in capsys.readouterr().err


def test_job_rl_takes_its_rollout_size_from_the_plan():
    from fmcluster.cli.posttraining_command import size_from_plan
    from fmcluster.posttraining import verl
    from fmcluster.registry import load_spec

    spec = load_spec("examples/eks-p5.yaml")
    run = verl.GrpoRun(name="x", model="meta-llama/Llama-3.1-8B-Instruct", model_dir="/m", data_dir="/d",
                       checkpoint_dir="/c", nodes=4, gpus_per_node=8)
    sized, said = size_from_plan(spec, spec.node_groups[0], run, explicit_tp=None)
    assert "plan --rl --model llama3.1-8b" in said and 1 <= sized.save_freq <= run.steps_per_epoch
    assert sized.rollout_tp in (1, 2, 4, 8)
    assert size_from_plan(spec, spec.node_groups[0], dataclasses.replace(run, model="someone/unknown"), None) is None


def test_plan_rules_rl_records_the_step_and_its_rollout_share(capsys):
    import yaml

    from fmcluster.acceptance import plan_rules

    assert main(["plan-rules", "examples/eks-p5.yaml", "--rl", "--model", "qwen2.5-7b"]) == 0
    (group,) = yaml.safe_load(capsys.readouterr().out)["groups"]
    assert group["name"] == plan_rules.RL_GROUP
    assert {r["record"] for r in group["rules"]} == set(plan_rules.RL_RECORDS)
    assert all(r["labels"]["node_group"] == "h100" and r["labels"]["model"] == "qwen2.5-7b" for r in group["rules"])


def test_the_doc_states_the_band_and_the_runs_the_model_gives():
    """docs/post-training.md's calibration table and band are what the model predicts now: a change of the constants
    or the model that moves them shows here until the doc says it (scripts/fit_rl.py prints both)."""
    import re
    from pathlib import Path

    from fmcluster.planner.rl_cli import band

    doc = (Path(__file__).resolve().parents[2] / "docs" / "post-training.md").read_text()
    dense = [r for r in rl.calibration() if r["set"] == "dense"]
    table = re.findall(r"^\| [^|]+ \| (colocated|one step off) \| ([\d.]+) s \| ([\d.]+) s \| ([+-]\d+)% \|$", doc, re.M)
    assert len(table) == len(dense)
    for (mode, measured, predicted, error), row in zip(table, dense):
        assert (mode == "colocated") == (row["mode"] == "colocated")
        assert float(measured) == row["measured_s"] and float(predicted) == row["predicted_s"]
        assert int(error) == round(row["error"] * 100)
    b, flat = band(), " ".join(doc.split())
    lo, hi = (round(e * 100) for e in b["dense_error"])
    assert f"Error band: **{lo:+d}% .. {hi:+d}%** on the {b['dense_runs']} dense runs" in flat
    assert max(abs(lo), abs(hi)) <= BAND * 100 and f"every dense run within {BAND:.0%}" in flat
    mlo, mhi = (round(e * 100) for e in b["moe_error"])
    assert f"({mlo:+d}% .. {mhi:+d}%)" in flat
    assert f"`TAIL` {rl.TAIL} and `TRAIN_SHARE` {rl.TRAIN_SHARE}" in doc
    assert f"read **±{rl.LEAVE_ONE_OUT:.0%}** for a dense model" in flat

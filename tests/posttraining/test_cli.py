"""`fmcluster job rl`, `job sft` and `plan --rl` on bad input: exit 2 with one line naming the option and what it
allows, never a traceback; the jobs' --out never replaces a file fmcluster did not write without --force."""

from __future__ import annotations

import shutil
import stat

import pytest

from fmcluster.cli import main
from fmcluster.outputs.write import is_own

EKS, SLURM, NONE = "examples/eks-p5.yaml", "examples/hyperpod-slurm-p5.yaml", "examples/default.yaml"


def refused(capsys, argv) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("job", ["rl", "sft"])
@pytest.mark.parametrize("spec", [EKS, SLURM])
@pytest.mark.parametrize("argv, says", [
    (["--nodes", "0"], "--nodes: 0 is not between 1 and the 4 nodes"),
    (["--nodes", "-1"], "--nodes: -1 is not between 1"),
    (["--nodes", "5"], "--nodes: 5 is not between 1 and the 4 nodes"),
    (["--nodes", "x"], "argument --nodes: invalid int value: 'x'"),
    (["--group", "nope"], "--group: no node group 'nope'; the spec has h100"),
    (["--model", "a;b"], "--model: 'a;b' is not a Hugging Face id: owner/name"),
    (["--model", "../../etc/x"], "--model: '../../etc/x' is not a Hugging Face id"),
    (["--model", "Qwen/Qwen\n"], "--model: 'Qwen/Qwen\\n' is not a Hugging Face id"),
    (["--image", "a$(id)"], "--image: 'a$(id)' is not an image reference: [registry/]repository[:tag]"),
    (["--image", "img:"], "--image: 'img:' is not an image reference"),
])
def test_bad_options_exit_2_naming_the_option_and_what_it_allows(capsys, job, spec, argv, says):
    assert says in refused(capsys, ["job", job, spec, *argv])


@pytest.mark.parametrize("spec", [EKS, SLURM, NONE])
@pytest.mark.parametrize("argv, says", [
    (["--rollout-tp", "0"], "--rollout-tp: 0 is not one of 1, 2: dividing the node's 8 GPUs and qwen2.5-0.5b's 14 "
                            "attention heads"),
    (["--rollout-tp", "3"], "--rollout-tp: 3 is not one of 1, 2:"),
    (["--rollout-tp", "16"], "--rollout-tp: 16 is not one of 1, 2:"),
    (["--model", "Qwen/Qwen2.5-7B-Instruct", "--rollout-tp", "8"], "--rollout-tp: 8 is not one of 1, 2, 4:"),
    (["--model", "someone/custom", "--rollout-tp", "3"], "--rollout-tp: 3 is not one of 1, 2, 4, 8 (dividing the "
                                                         "node's 8 GPUs"),
    (["--model", "Qwen/Qwen3-235B-A22B", "--nodes", "1"], "--model: `fmcluster plan --rl --model qwen3-235b-a22b` "
                                                          "fits qwen3-235b-a22b's weights"),
])
def test_job_rl_holds_the_rollout_size_to_what_the_engine_runs(capsys, spec, argv, says):
    assert says in refused(capsys, ["job", "rl", spec, *argv])


def test_job_sft_refuses_a_bad_data_set_id(capsys):
    assert "--dataset: 'x y' is not a Hugging Face id" in refused(capsys, ["job", "sft", EKS, "--dataset", "x y"])


def test_a_good_choice_is_taken(capsys):
    assert main(["job", "rl", EKS, "--model", "Qwen/Qwen2.5-7B-Instruct", "--rollout-tp", "4", "--nodes", "2",
                 "--image", "123456789012.dkr.ecr.us-east-1.amazonaws.com/verl:efa-0.6.0"]) == 0
    out = capsys.readouterr().out
    assert "tensor_model_parallel_size=4" in out and "trainer.nnodes=2" in out
    assert "image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/verl:efa-0.6.0" in out


@pytest.mark.parametrize("job", ["rl", "sft"])
def test_out_never_replaces_a_file_fmcluster_did_not_write_without_force(tmp_path, capsys, job):
    out = tmp_path / "job.yaml"
    out.write_text("mine\n")
    assert "exists and fmcluster did not write it" in refused(capsys, ["job", job, EKS, "--out", str(out)])
    assert out.read_text() == "mine\n"
    assert main(["job", job, EKS, "--out", str(out), "--force"]) == 0 and is_own(out)
    assert main(["job", job, EKS, "--out", str(out)]) == 0, "its own file, unchanged since: replaced"
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    with out.open("a") as f:
        f.write("# edited\n")
    assert "or it changed since" in refused(capsys, ["job", job, EKS, "--out", str(out)])
    spec = tmp_path / "spec.yaml"
    shutil.copy(EKS, spec)
    assert "is the spec" in refused(capsys, ["job", job, str(spec), "--out", str(spec), "--force"])
    assert "is a directory" in refused(capsys, ["job", job, EKS, "--out", str(tmp_path)])


def test_a_refused_job_leaves_no_file(tmp_path, capsys):
    out = tmp_path / "job.yaml"
    refused(capsys, ["job", "rl", EKS, "--out", str(out), "--rollout-tp", "3"])
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, says", [
    (["--rl", "--prompts", "inf"], "--prompts: 'inf' is not a whole number of at least 1"),
    (["--rl", "--prompts", "1e400"], "--prompts: '1e400' is not a whole number of at least 1"),
    (["--rl", "--prompts", "1.5"], "--prompts: '1.5' is not a whole number of at least 1"),
    (["--rl", "--group-size", "nan"], "--group-size: 'nan' is not a whole number"),
    (["--rl", "--rollout-length", "0"], "--rollout-length: '0' is not a whole number of at least 1"),
    (["--rl", "--max-rollout-length", "10"], "--max-rollout-length: 10 is shorter than --rollout-length 1024"),
    (["--rl", "--rollout-tp", "3"], "--rollout-tp: 3 on node group h100 is not one of 1, 2:"),
    (["--rl", "--model", "qwen2.5-7b", "--rollout-tp", "8"], "--rollout-tp: 8 on node group h100 is not one of "
                                                             "1, 2, 4:"),
    (["--rl", "--model", "deepseek-v3"], "--model: deepseek-v3's weights (1250 GiB in bf16) fit the rollout engine's "
                                         "share of a H100's HBM at no tensor-parallel size of [1, 2, 4, 8] within a "
                                         "node; give --rollout-tp 16 or 32"),
    (["--rl", "--model", "qwen3-235b-a22b", "--rollout-tp", "8"], "give a larger one: 16, 32"),
    (["--rl", "--algorithm", "dapo"], "argument --algorithm: invalid choice: 'dapo'"),
    (["--rl", "--group", "nope"], "--group: no GPU node group 'nope'"),
    (["--rl", "--model", "nope"], "--model: 'nope' is not a preset:"),
    (["--rl", "--params", "7B"], "--params: plans pre-training and does nothing with --rl; an RL step takes --model"),
    (["--rl", "--html", "x.html"], "--html: plans pre-training and does nothing with --rl"),
    (["--rl", "--precision", "fp8"], "--precision: plans pre-training"),
    (["--rl", "--layout", "tp=8"], "--layout: plans pre-training"),
    (["--rl", "--price", "h100=3"], "--price: plans pre-training"),
    (["--model", "llama3.1-8b", "--prompts", "512"], "--prompts: sizes an RL step; add --rl"),
    (["--model", "llama3.1-8b", "--rollout-tp", "2"], "--rollout-tp: sizes an RL step; add --rl"),
    (["--model", "llama3.1-8b", "--algorithm", "ppo"], "--algorithm: sizes an RL step; add --rl"),
])
def test_plan_rl_bad_input_exits_2_naming_the_option(capsys, argv, says):
    assert says in refused(capsys, ["plan", EKS, *argv])


def test_plan_rules_holds_the_same_rules(tmp_path, capsys):
    assert "--params: plans pre-training" in refused(capsys, ["plan-rules", EKS, "--rl", "--params", "7B"])
    assert "--prompts: sizes an RL step" in refused(capsys, ["plan-rules", EKS, "--model", "llama3.1-8b",
                                                             "--prompts", "3"])
    out = tmp_path / "rules.yaml"
    out.write_text("mine\n")
    assert "exists and fmcluster did not write it" in refused(capsys, ["plan-rules", EKS, "--rl", "--out", str(out)])
    assert main(["plan-rules", EKS, "--rl", "--out", str(out), "--force"]) == 0 and is_own(out)


def test_plan_rl_takes_counts_as_plan_does_and_a_tensor_parallel_size_across_nodes_by_name(capsys):
    assert main(["plan", EKS, "--rl", "--prompts", "1K", "--group-size", "4"]) == 0
    assert "4000 responses per step" in capsys.readouterr().out
    assert main(["plan", EKS, "--rl", "--model", "deepseek-v3", "--rollout-tp", "32"]) == 0
    assert "rollout tensor parallel 32" in capsys.readouterr().out

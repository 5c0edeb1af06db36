"""`fmcluster plan SPEC --serve`: memory per GPU, the bounds, the parallelism within the SLOs, replicas for a rate,
aggregated against disaggregated with the reason, cost per million output tokens and cold start; bad options exit 2."""

from __future__ import annotations

import json

import pytest

from fmcluster.planner.serving.plan import Request, plan
from fmcluster.spec import serving_models, serving_sizing

EKS = "examples/eks-p5.yaml"


def test_weights_and_kv_cache_per_gpu_follow_the_architecture():
    a = serving_models.get("llama3.1-70b")
    r = serving_sizing.Replica(a, serving_sizing.gpu("p5en.48xlarge"), tp=2, weights="fp8")
    # FP8 layers plus 16-bit input and output embeddings, over two GPUs
    assert r.weight_bytes_per_gpu == pytest.approx(((a.params - 2 * a.vocab * a.hidden) + 4 * a.vocab * a.hidden) / 2)
    # 80 layers x K and V x 8 KV heads x 128 x 2 bytes = 320 KiB per token, split over two ranks
    assert r.kv_bytes_per_token_per_gpu == 160 * 1024
    # a latent cache (DeepSeek's MLA) is held whole on every rank
    ds = serving_sizing.Replica(serving_models.get("deepseek-r1"), r.hw, tp=8, weights="fp8")
    assert ds.kv_bytes_per_token_per_gpu == 61 * 576 * 2


def test_a_mixture_of_experts_reads_the_experts_a_step_selects():
    a = serving_models.get("qwen3-235b-a22b")
    assert a.expert_fraction_read(1) == pytest.approx(8 / 128)
    assert a.expert_fraction_read(64) > 0.98
    r = serving_sizing.Replica(a, serving_sizing.gpu("p6-b200.48xlarge"), tp=4, weights="fp8")
    assert r.decode_step_s(1, 2000) < r.decode_step_s(64, 2000)


def test_the_plan_meets_its_slos_and_prices_the_tokens():
    req = Request(name="m", architecture="llama3.3-70b", instance_type="p5en.48xlarge", region="us-east-1",
                  weights="fp8", prompt=2000, output=500, rate=4, ttft_ms=2000, tpot_ms=50)
    r = plan(req)
    assert [m["tensor"] for m in r["memory"]] == [1, 2, 4, 8] and all(m["fits"] for m in r["memory"])
    pick = r["aggregated"][0]
    assert pick["tpot_ms"] <= 50 and pick["ttft_ms"] <= 2000
    assert pick["replicas"] * pick["replica_rps"] >= 4 and pick["usd_per_million_output_tokens"] > 0
    assert r["choice"]["mode"] in ("aggregated", "disaggregated") and r["choice"]["reason"]
    assert r["cold_start"]["read_s"] > 0


def test_a_prompt_heavy_mix_under_a_tight_tpot_disaggregates_and_says_why():
    req = Request(name="m", architecture="llama3.3-70b", instance_type="p5en.48xlarge", region="us-east-1",
                  weights="fp8", prompt=8000, output=300, rate=4, ttft_ms=4000, tpot_ms=20)
    c = plan(req)["choice"]
    assert c["mode"] == "disaggregated", c
    assert "prefills sharing their steps" in c["reason"] or "push TPOT past the SLO" in c["reason"]
    no_efa = plan(Request(**{**req.__dict__, "efa": False}))
    assert no_efa["disaggregated"] == [] and "no EFA" in no_efa["choice"]["reason"]


def test_cli_plans_the_spec_deployments_or_a_model(capsys):
    from fmcluster.cli import main

    assert main(["plan", EKS, "--serve", "--model", "qwen3-8b", "--rate", "10", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["serving"][0]
    assert report["model"] == "qwen3-8b" and report["instance_type"] == "p5.48xlarge"
    assert main(["plan", EKS, "--serve", "--model", "llama3.1-8b"]) == 0
    out = capsys.readouterr().out
    assert "aggregated (largest concurrency within both SLOs" in out and "per million output tokens" in out


@pytest.mark.parametrize("argv,needle", [
    (["--serve"], "--serve: the spec has no serving section"),
    (["--serve", "--model", "gpt-5"], "--model: 'gpt-5' is not a serving architecture"),
    (["--serve", "--model", "qwen3-8b", "--rate", "0"], "--rate: must be greater than 0"),
    (["--serve", "--model", "qwen3-8b", "--kv-cache", "int4"], "--kv-cache: 'int4'"),
])
def test_bad_options_exit_2(argv, needle, capsys):
    from fmcluster.cli import main

    assert main(["plan", EKS, *argv]) == 2
    assert needle in capsys.readouterr().err

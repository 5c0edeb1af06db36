"""Figures checked against published numbers, each with its source."""

from __future__ import annotations

import pytest
from helpers.planner import ZERO, hardware

from fmcluster.planner import collectives as c
from fmcluster.planner.layouts import Layout
from fmcluster.planner.memory import memory
from fmcluster.planner.models import Model, architecture_params, build, preset
from fmcluster.planner.steptime import flops_per_token


def dense(params: float, **kw) -> Model:
    base = dict(name="m", params=params, layers=32, hidden=4096, heads=32, seq=2048)
    base.update(kw)
    return build(base, "--model")


@pytest.mark.parametrize("n", [2, 8, 16, 512])
def test_ring_bus_bandwidth_factors(n):
    # nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw x 2(n-1)/n; all-gather and reduce-scatter (n-1)/n
    size, bw = 1e9, 100e9
    assert c.ring_seconds(c.ALL_REDUCE, size, n, bw) == pytest.approx(2 * (n - 1) / n * size / bw)
    assert c.ring_seconds(c.ALL_GATHER, size, n, bw) == pytest.approx((n - 1) / n * size / bw)
    assert c.ring_seconds(c.REDUCE_SCATTER, size, n, bw) == pytest.approx((n - 1) / n * size / bw)
    assert c.ring_seconds(c.ALL_REDUCE, size, 1, bw) == 0


def test_zero_paper_figure_1_model_states_of_7_5b_on_64_gpus():
    # Rajbhandari et al., ZeRO, arXiv:1910.02054 Figure 1 / §3.1: Psi = 7.5B, K = 12, Nd = 64:
    # baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB
    m = dense(7.5e9)
    lay = Layout(tp=1, pp=1, dp=64, ep=1, micro_batch=1, microbatches=1, seq=2048)

    def states(sharding):
        mem = memory(m, lay, ZERO[sharding], "full")
        return (mem.weights + mem.gradients + mem.optimizer) / 1e9

    assert states("ddp") == pytest.approx(120.0)
    assert states("zero1") == pytest.approx(31.4, abs=0.05)
    assert states("zero2") == pytest.approx(16.6, abs=0.05)
    assert states("zero3") == pytest.approx(1.9, abs=0.05)


def test_70b_optimizer_state_is_12_bytes_per_parameter():
    # ZeRO §3.1: fp32 parameters, momentum and variance, K = 12 bytes per parameter: 70e9 x 12 = 840 GB
    lay = Layout(tp=1, pp=1, dp=1, ep=1, micro_batch=1, microbatches=1, seq=2048)
    assert memory(dense(70e9), lay, ZERO["ddp"], "full").optimizer == pytest.approx(840e9)
    llama = preset("llama3-70b")
    assert memory(llama, Layout(1, 1, 1, 1, 1, 1, 8192), ZERO["ddp"], "full").optimizer == pytest.approx(12 * 70_553_706_496)


def test_llama_parameter_counts_equal_the_checkpoints():
    # Hugging Face model cards of meta-llama/Llama-3.1-{8B,70B,405B}: 8.03B, 70.6B, 406B parameters (safetensors)
    assert architecture_params(32, 4096, 32, 8, 14336, 128256) == 8_030_261_248
    assert architecture_params(80, 8192, 64, 8, 28672, 128256) == 70_553_706_496
    assert architecture_params(126, 16384, 128, 8, 53248, 128256) == 405_853_388_800


def test_a_head_size_other_than_128_comes_from_hidden_over_heads():
    """Llama 3.2 1B (Hugging Face config: hidden 2048, 32 heads of 64, 8 KV heads, ffn 8192, vocab 128256) has
    1,235,814,400 parameters with its embeddings tied; the planner counts the output layer apart (untied)."""
    tied_published, output_layer = 1_235_814_400, 128256 * 2048
    raw = {"layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "ffn": 8192, "vocab": 128256}
    assert build(raw, "--model").params == tied_published + output_layer
    assert build({**raw, "head_dim": 64}, "--model").params == tied_published + output_layer
    assert build({**raw, "head_dim": 128}, "--model").params > tied_published + output_layer


def test_mixtral_total_and_active_parameters():
    # Jiang et al., arXiv:2401.04088 §2: 47B parameters, 13B active per token
    m = preset("mixtral-8x7b")
    assert m.params / 1e9 == pytest.approx(46.7, abs=0.05) and m.active_params / 1e9 == pytest.approx(12.9, abs=0.05)
    assert architecture_params(32, 4096, 32, 8, 14336, 32000, experts=8, expert_ffn=14336) == m.params
    # active parameters from the expert split agree with the published figure
    derived = build({"params": m.params, "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 32000,
                     "experts": 8, "active_experts": 2, "expert_ffn": 14336}, "--model")
    assert derived.active_params == pytest.approx(m.active_params, rel=1e-4)


def test_gpt3_training_compute():
    # Brown et al., arXiv:2005.14165 Table D.1: GPT-3 175B, 300B tokens, 3.14e23 FLOPs (6 N D)
    gpt3 = dense(174.6e9, layers=96, hidden=12288, heads=96, seq=2048)
    assert flops_per_token(gpt3, "selective") * 300e9 == pytest.approx(3.14e23, rel=0.05)
    # PaLM (arXiv:2204.02311 App. B) counts attention as 12 L H Q T with H Q = h, the full s x s square; a causal mask
    # computes half of it, as NVIDIA's model-FLOPs figures count (see test_planner_recipes.py)
    assert flops_per_token(gpt3, "selective") == pytest.approx(6 * 174.6e9 + 12 * 96 * 12288 * 2048 / 2)


def test_compute_bound_is_flops_over_peak_times_mfu():
    from fmcluster.planner.steptime import step

    hw = hardware("p5.48xlarge", 2)
    m = preset("llama3-8b")
    lay = Layout(tp=1, pp=1, dp=16, ep=1, micro_batch=1, microbatches=32, seq=8192)
    st = step(m, hw, lay, ZERO["zero1"], "none", mfu=0.4)  # --mfu: every FLOP at that share of the dense peak
    assert st.compute_s == pytest.approx(flops_per_token(m, "none") * lay.tokens_per_step / (16 * 989e12 * 0.4))
    assert st.bound_s >= st.compute_s


def test_fp8_uses_the_catalog_fp8_dense_peak():
    from fmcluster.planner.steptime import step

    m = preset("llama3-8b")
    lay = Layout(tp=1, pp=1, dp=16, ep=1, micro_batch=1, microbatches=32, seq=8192)
    bf16 = step(m, hardware("p5.48xlarge", 2, "bf16"), lay, ZERO["zero1"], "selective", 0.4)
    fp8 = step(m, hardware("p5.48xlarge", 2, "fp8"), lay, ZERO["zero1"], "selective", 0.4)
    assert fp8.compute_s == pytest.approx(bf16.compute_s * 989 / 1979)  # NVIDIA H100 SXM dense BF16 / FP8 TFLOPS

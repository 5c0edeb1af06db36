"""Published training runs reproduced from their sources (docs/planning.md cites each figure).

Each throughput check feeds the planner the run's published layout and its published utilization as --mfu, and
compares the planner's estimate (bubble, exposed communication, narrow GEMMs charged) with the published throughput.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers.planner import hardware

from fmcluster.planner import collectives as c
from fmcluster.planner.efficiency import estimate
from fmcluster.planner.frameworks import MEGATRON
from fmcluster.planner.layouts import Layout, expert_layouts, virtual_stages
from fmcluster.planner.memory import memory
from fmcluster.planner.models import preset, with_seq
from fmcluster.planner.search import evaluate
from fmcluster.planner.steptime import flops_per_token, step

DISTOPT = MEGATRON.sharding("distopt")


def tokens_per_s_per_gpu(model, hw, lay, mfu, recompute="selective"):
    st = step(model, hw, lay, DISTOPT, recompute, mfu)
    return st.tokens / estimate(model, hw, lay, DISTOPT, "megatron", st).seconds / hw.gpus


@pytest.mark.parametrize("nodes, lay, mfu, published_tflops", [
    # Llama Team, 'The Llama 3 Herd of Models' (arXiv:2407.21783) Table 4: GPUs, TP, CP, PP, DP, sequence length,
    # sequences per data-parallel rank (16M tokens per batch each), TFLOPs/GPU and BF16 MFU; interleaved (§3.3.2)
    (1024, Layout(tp=8, pp=16, dp=64, ep=1, micro_batch=1, microbatches=32, seq=8192, vp=8), 0.43, 430),
    (2048, Layout(tp=8, pp=16, dp=128, ep=1, micro_batch=1, microbatches=16, seq=8192, vp=8), 0.41, 400),
    (2048, Layout(tp=8, pp=16, dp=8, ep=1, micro_batch=1, microbatches=16, seq=131072, cp=16, vp=8), 0.38, 380),
])
def test_llama3_405b_at_its_published_layout_and_mfu(nodes, lay, mfu, published_tflops):
    m, hw = with_seq(preset("llama3-405b"), lay.seq), hardware("p5.48xlarge", nodes)
    assert lay.gpus == hw.gpus and lay.tokens_per_step == 16 * 2**20
    assert max(virtual_stages(m, replace(lay, vp=1))) == 8  # 126 layers over 16 stages: one layer per virtual stage
    st = step(m, hw, lay, DISTOPT, "selective", mfu)
    achieved = estimate(m, hw, lay, DISTOPT, "megatron", st).mfu * 989  # model TFLOP/s per H100 at the estimate
    assert achieved == pytest.approx(published_tflops, rel=0.15)


def test_plain_1f1b_would_halve_meta_s_throughput():
    """TP8/PP16 with 16 micro-batches per rank: 1F1B idles 15/16 of the compute in its bubble; interleaving with one
    layer per virtual stage cuts it to 15/128."""
    m, hw = preset("llama3-405b"), hardware("p5.48xlarge", 2048)
    plain = Layout(tp=8, pp=16, dp=128, ep=1, micro_batch=1, microbatches=16, seq=8192)
    tput = {v: tokens_per_s_per_gpu(m, hw, replace(plain, vp=v), 0.41) for v in (1, 8)}
    assert tput[1] < 0.6 * tput[8]


@pytest.mark.parametrize("name, nodes, lay, published_tokens, published_tflops", [
    # Megatron Bridge performance summary, 25.11 NeMo container, DGX-H100, FP8-CS, GBS 128 / 512, MBS 1, seq 8192
    ("llama3-70b", 8, Layout(tp=4, pp=8, dp=2, ep=1, micro_batch=1, microbatches=64, seq=8192, vp=5), 1602, 719),
    ("llama3-405b", 128, Layout(tp=8, pp=8, dp=8, ep=1, micro_batch=1, microbatches=64, seq=8192, cp=2, vp=8), 292,
     737),
])
def test_nvidia_megatron_performance_summary(name, nodes, lay, published_tokens, published_tflops):
    m, hw = preset(name), hardware("p5.48xlarge", nodes, "fp8")
    assert lay.gpus == hw.gpus
    # NVIDIA's model FLOPs count causal attention: tokens/s x the planner's FLOPs per token = their TFLOP/s
    assert published_tokens * flops_per_token(m, "none") / 1e12 == pytest.approx(published_tflops, rel=0.01)
    mfu = published_tflops / 1979  # of the H100's dense FP8 peak
    assert tokens_per_s_per_gpu(m, hw, lay, mfu) == pytest.approx(published_tokens, rel=0.15)


def test_causal_attention_with_mla_width():
    # DeepSeek-V3 §4.2: 128 heads, query/key width 128 + 64 (decoupled RoPE), value width 128
    m = preset("deepseek-v3")
    attention = flops_per_token(m, "none") - 6 * (m.active_params - m.vocab * m.hidden)
    assert attention == pytest.approx(3 * 61 * 4096 * 128 * (192 + 128))


DEEPSEEK_BATCH = 15360 * 4096  # §4.2: batch grows to 15,360 sequences of 4K tokens
DEEPSEEK_PRETRAINING_GPU_HOURS = 2.664e6  # §1 / Table 1: 14.8T tokens; 2.788M with context extension and post-training


def gpu_hours(cand, gpus):
    return 14.8e12 / (cand.step.tokens / cand.estimate.seconds) / 3600 * gpus


def test_deepseek_v3_on_2048_gpus_ranks_an_expert_parallel_layout_first_within_20_percent_of_its_gpu_hours():
    """2,048 H100 (p5.48xlarge: the H800's dense peak and memory) at the default 0.4 utilization."""
    m, hw = preset("deepseek-v3"), hardware("p5.48xlarge", 256)
    cands = evaluate(m, hw, DEEPSEEK_BATCH, 1, 0.4)
    top = cands[0]
    assert top.fits and top.layout.ep >= 8 and top.layout.tp <= 2
    assert gpu_hours(top, 2048) == pytest.approx(DEEPSEEK_PRETRAINING_GPU_HOURS, rel=0.20)
    # and of the headline 2.788M, which adds 119K GPU-hours of context extension and 5K of post-training
    assert gpu_hours(top, 2048) == pytest.approx(2.788e6, rel=0.20)
    published = [x for x in cands if (x.layout.tp, x.layout.cp, x.layout.pp, x.layout.dp, x.layout.ep,
                                      x.layout.expert_tp) == (1, 1, 16, 128, 64, 1)]
    assert published and published[0].fits  # §3.2.1: PP 16, EP 64 over 8 nodes, ZeRO-1 data parallelism


def test_deepseek_v3_published_layout_within_20_percent_where_memory_allows_its_recomputation_policy():
    """On 80 GB the planner's activation model (bf16, Korthikanti) needs full recomputation for PP16/EP64, which
    DeepSeek avoided with FP8 activation caching and partial recomputation (§3.2.3): on H200 (p5en.48xlarge, the same
    dense peak) the layout runs with selective recomputation and lands on the published GPU-hours."""
    m, hw = preset("deepseek-v3"), hardware("p5en.48xlarge", 256)
    cands = evaluate(m, hw, DEEPSEEK_BATCH, 1, 0.4)
    (published,) = [x for x in cands if (x.layout.tp, x.layout.cp, x.layout.pp, x.layout.dp, x.layout.ep)
                    == (1, 1, 16, 128, 64)]
    assert published.memory.recompute != "full"
    assert gpu_hours(published, 2048) == pytest.approx(DEEPSEEK_PRETRAINING_GPU_HOURS, rel=0.20)
    assert cands[0].layout.ep > 1


def test_node_limited_routing_bounds_the_all_to_all_across_nodes():
    """DeepSeek-V3 §2.1.2: each token goes to at most 4 nodes, so at most 4 copies cross the network, not the ~7 of 8
    expert copies that land outside the node when routing is free."""
    m, hw = preset("deepseek-v3"), hardware("p5.48xlarge", 256)
    lay = Layout(tp=1, pp=16, dp=128, ep=64, micro_batch=1, microbatches=120, seq=4096, vp=4)
    limited = next(x for x in step(m, hw, lay, DISTOPT, "selective", 0.4).collectives if x.kind == c.ALL_TO_ALL)
    free = next(x for x in step(replace(m, routed_nodes=0), hw, lay, DISTOPT, "selective", 0.4).collectives
                if x.kind == c.ALL_TO_ALL)
    assert limited.internode_s == pytest.approx(free.internode_s * (4 * 7 / 8) / (8 * 56 / 64))
    fp8 = next(x for x in step(m, hardware("p5.48xlarge", 256, "fp8"), lay, DISTOPT, "selective", 0.4).collectives
               if x.kind == c.ALL_TO_ALL)
    assert fp8.internode_s == pytest.approx(limited.internode_s * 0.75)  # dispatch in fp8, combine in bf16 (§3.3.2)


def test_expert_groups_fold_over_tensor_ranks_inside_a_72_gpu_domain():
    """Megatron Core MoE parallel folding: with etp = 1 an expert group takes consecutive ranks, tensor ranks
    included, so 16 GB200 instances of one NVL72 domain (64 GPUs) at tp = 8 run a 64-way expert group, where drawing
    experts from the 8 data-parallel ranks alone allows 8, and it stays on NVLink."""
    m, hw = preset("deepseek-v3"), hardware("p6e-gb200.36xlarge", 16)
    base = Layout(tp=8, pp=1, dp=8, ep=1, micro_batch=1, microbatches=8, seq=4096)
    eps = {(x.ep, x.expert_tp) for x in expert_layouts(m, base)}
    assert (64, 1) in eps and max(e for e, t in eps if t == 8) == 8
    lay = replace(base, ep=64, etp=1)
    assert lay.expert_dp == 1
    a2a = next(x for x in step(m, hw, lay, DISTOPT, "full", 0.4).collectives if x.kind == c.ALL_TO_ALL)
    assert a2a.internode_s == 0 and a2a.nvlink_s > 0
    assert memory(m, lay, DISTOPT, "full").optimizer > 0

"""Context parallelism is not free: each ring transfer is charged against the attention block it overlaps, the
attention kernel runs slower on the shorter blocks, and the plan picks CP only where the sequence needs it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers.planner import hardware, spec

from fmcluster.planner.efficiency import estimate
from fmcluster.planner.frameworks import MEGATRON
from fmcluster.planner.layouts import Layout
from fmcluster.planner.models import preset, with_seq
from fmcluster.planner.rates import block_efficiency
from fmcluster.planner.report import PlanOptions, build
from fmcluster.planner.steptime import step

DISTOPT = MEGATRON.sharding("distopt")


def ring(model, hw, lay):
    st = step(model, hw, lay, DISTOPT, "none")
    cp = next(x for x in st.collectives if x.group == "cp")
    return cp, estimate(model, hw, lay, DISTOPT, "megatron", st)


def test_a_transfer_that_fits_its_block_leaves_only_the_last_gradient_transfer_of_each_layer():
    m, hw = preset("llama3-8b"), hardware("p5.48xlarge", 1)
    lay = Layout(tp=1, pp=1, dp=4, ep=1, micro_batch=1, microbatches=32, seq=8192, cp=2)
    cp, e = ring(m, hw, lay)
    assert e.exposed["cp"] == pytest.approx(cp.seconds / 3) and e.exposed["cp"] > 0


def test_a_64_node_ring_buys_nothing_over_the_16_way_ring_that_fits():
    """405B at 128K, tp 8: cp = 64 puts a 512-GPU ring over 64 nodes and cuts every attention block to 1,024 tokens;
    attention, most of a 128K step, runs 15% slower, which eats what the ring's extra micro-batches save in bubble."""
    m, hw = with_seq(preset("llama3-405b"), 131072), hardware("p5.48xlarge", 2048)
    wide = Layout(tp=8, pp=16, dp=2, ep=1, micro_batch=1, microbatches=64, seq=131072, cp=64, vp=8)
    narrow = replace(wide, cp=16, dp=8, microbatches=16)
    cp_wide, e_wide = ring(m, hw, wide)
    assert cp_wide.internode_s > 0 and e_wide.exposed["cp"] > 0
    _, e_narrow = ring(m, hw, narrow)
    attention = {k: step(m, hw, lay, DISTOPT, "none").rates.attention_s / lay.tokens_per_step
                 for k, lay in (("wide", wide), ("narrow", narrow))}
    assert attention["wide"] > 1.1 * attention["narrow"]
    assert e_wide.seconds / wide.tokens_per_step >= e_narrow.seconds / narrow.tokens_per_step


def test_short_attention_blocks_run_slower():
    """FlashAttention-3's measured forward rate falls from 614 TFLOP/s at 8K tokens to 430 at 512 (pytorch/benchmark
    ff65cb67): ring attention's load-balanced split gives each rank blocks of s/(2 cp) tokens."""
    m = preset("llama3-8b")
    base = Layout(tp=1, pp=1, dp=8, ep=1, micro_batch=1, microbatches=4, seq=8192)
    rates = {cp: block_efficiency(m, replace(base, cp=cp, dp=8 // cp)) for cp in (1, 2, 4, 8)}
    assert rates[1] > rates[2] > rates[4] > rates[8]
    assert rates[8] == pytest.approx(512 / (512 + 226))


def test_an_8b_model_on_one_node_gets_no_context_parallelism():
    """The planner's top pick for Llama 3.1 8B on 8 H100 at 8K tokens was CP 4."""
    job = build(spec("p5.48xlarge", 1), preset("llama3-8b"), PlanOptions())["jobs"][0]
    assert job["best"][0]["layout"]["cp"] == 1
    assert "no context parallelism at 8,192 tokens" in job["ties"]["reasons"][0]


def test_at_128k_the_plan_takes_the_context_parallelism_the_sequence_needs_not_a_64_node_ring():
    """Llama 3 405B at 128K on 16,384 H100 (Llama 3 Table 4 ran TP 8, CP 16, PP 16): the pick's ring stays at 16."""
    model = with_seq(preset("llama3-405b"), 131072)
    job = build(spec("p5.48xlarge", 2048), model, PlanOptions(global_batch_tokens=16 * 2**20))["jobs"][0]
    pick = job["best"][0]["layout"]
    assert 1 < pick["cp"] <= 16
    assert "context parallelism" in job["ties"]["reasons"][0]

"""The estimate beside the bound: narrow GEMMs, the pipeline bubble, and communication each framework leaves exposed;
context parallelism and interleaving with their traffic."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers.planner import ZERO, hardware

from fmcluster.planner.efficiency import estimate, gemm_efficiency
from fmcluster.planner.frameworks import MEGATRON
from fmcluster.planner.layouts import Layout
from fmcluster.planner.memory import activations, in_flight, memory
from fmcluster.planner.models import preset
from fmcluster.planner.search import evaluate
from fmcluster.planner.steptime import step

DISTOPT = MEGATRON.sharding("distopt")


def test_narrow_gemms_at_high_tensor_parallelism_lose_efficiency():
    m = preset("llama3-8b")  # 32 heads of 128: 4096 wide
    at = {tp: gemm_efficiency(m, Layout(tp, 1, 1, 1, 1, 1, 8192)) for tp in (1, 2, 4, 8)}
    assert at[1] == at[2] == at[4] == 1.0  # 1,024 and wider: the regime --mfu describes
    assert at[8] == pytest.approx((512 / 576) / (1024 / 1088))


def test_the_estimate_is_never_below_the_bound_and_ranks_the_layouts():
    m, hw = preset("llama3-70b"), hardware("p5.48xlarge", 8)
    cands = [c for c in evaluate(m, hw, 4 * 2**20, 1, 0.4) if c.fits]
    assert all(c.estimate.seconds >= c.step.bound_s for c in cands)
    per_token = [c.estimate.seconds / c.step.tokens for c in cands]
    assert per_token == sorted(per_token)


def test_tensor_parallel_traffic_is_exposed_by_framework():
    m, hw = preset("llama3-8b"), hardware("p5.48xlarge", 1)
    lay = Layout(tp=8, pp=1, dp=1, ep=1, micro_batch=1, microbatches=64, seq=8192)
    st = step(m, hw, lay, DISTOPT, "selective", 0.4)
    tp = next(x for x in st.collectives if x.group == "tp").seconds
    assert estimate(m, hw, lay, DISTOPT, "megatron", st).exposed["tp"] == pytest.approx(0.25 * tp)
    assert estimate(m, hw, lay, ZERO["ddp"], "deepspeed", st).exposed["tp"] == pytest.approx(tp)


def test_data_parallel_traffic_shows_one_layer_chunk_when_it_fits_its_window():
    m, hw = preset("llama3-8b"), hardware("p5.48xlarge", 4)
    lay = Layout(tp=1, pp=1, dp=32, ep=1, micro_batch=1, microbatches=4, seq=8192, cp=1)
    st = step(m, hw, lay, DISTOPT, "full", 0.4)
    e = estimate(m, hw, lay, DISTOPT, "megatron", st)
    dp = [x for x in st.collectives if x.group == "dp"]
    assert e.exposed["dp"] == pytest.approx(sum(x.seconds for x in dp) / 32)  # 32 layers, one chunk each exposed


def test_interleaving_divides_the_bubble_multiplies_sends_and_grows_in_flight_activations():
    m, hw = preset("llama3-70b"), hardware("p5.48xlarge", 8)
    one = Layout(tp=8, pp=8, dp=1, ep=1, micro_batch=1, microbatches=16, seq=8192)
    five = replace(one, vp=5)
    s1, s5 = step(m, hw, one, DISTOPT, "selective", 0.4), step(m, hw, five, DISTOPT, "selective", 0.4)
    assert s1.bubble_s == pytest.approx(s1.compute_s * 7 / 16) and s5.bubble_s == pytest.approx(s1.bubble_s / 5)
    sends = {s: next(x for x in st.collectives if x.group == "pp") for s, st in ((1, s1), (5, s5))}
    assert sends[5].calls == 5 * sends[1].calls
    assert in_flight(five) == pytest.approx(8 * (1 + 7 / 40))  # Korthikanti et al. §4.2.3
    assert activations(m, five, "selective") > activations(m, one, "selective")


def test_context_parallelism_splits_activations_and_passes_keys_and_values_around_a_ring():
    m, hw = preset("llama3-8b"), hardware("p5.48xlarge", 1)
    one = Layout(tp=1, pp=1, dp=8, ep=1, micro_batch=1, microbatches=4, seq=8192)
    two = Layout(tp=1, pp=1, dp=4, ep=1, micro_batch=1, microbatches=8, seq=8192, cp=2)
    assert activations(m, two, "selective") == pytest.approx(activations(m, one, "selective") / 2)
    assert memory(m, two, DISTOPT, "selective").optimizer == pytest.approx(memory(m, one, DISTOPT, "selective").optimizer)
    cp = next(x for x in step(m, hw, two, DISTOPT, "selective", 0.4).collectives if x.group == "cp")
    # keys and values of 4,096 tokens x 8 KV heads x (128 + 128) x 2 bytes; 1 send forward, 2 backward, per layer
    assert cp.bytes_per_call == 4096 * 8 * 256 * 2 and cp.calls == 3 * 1 * 32 * 8
    assert cp.internode_s == 0  # cp = 2 inside one node
    e = estimate(m, hw, two, DISTOPT, "megatron", step(m, hw, two, DISTOPT, "selective", 0.4))
    # each transfer hides behind one block of attention; the last gradient transfer of each layer has nothing left
    # to hide behind: one of the three transfers per layer and micro-batch
    assert e.exposed["cp"] == pytest.approx(cp.seconds / 3)


def test_expert_all_to_all_without_nvlink_crosses_the_network():
    """p5.4xlarge has one H100 and no NVLink: every expert copy bound for another GPU leaves through the network."""
    from fmcluster.planner import collectives as c
    from fmcluster.planner.models import build

    m = build({"name": "moe", "layers": 16, "hidden": 2048, "heads": 16, "vocab": 32000, "ffn": 8192, "experts": 16,
               "active_experts": 4, "expert_ffn": 1024, "routed_nodes": 2, "seq": 4096}, "--model")
    hw = hardware("p5.4xlarge", 16)
    lay = Layout(tp=1, pp=1, dp=16, ep=16, micro_batch=1, microbatches=4, seq=4096)
    a2a = next(x for x in step(m, hw, lay, DISTOPT, "selective", 0.4).collectives if x.kind == c.ALL_TO_ALL)
    assert a2a.nvlink_s == 0 and a2a.internode_s > 0
    assert evaluate(m, hw, 4 * 2**20, 1, 0.4)[0].fits

"""Where step time goes: NVLink inside a domain, EFA across; the GB200 UltraServer keeps all-to-all on NVLink."""

from __future__ import annotations

import pytest
from helpers.planner import ZERO, hardware, spec

from fmcluster.planner import collectives as c
from fmcluster.planner.hardware import of_group
from fmcluster.planner.layouts import Layout, enumerate_layouts, stage_params
from fmcluster.planner.models import build, preset
from fmcluster.planner.report import PlanOptions
from fmcluster.planner.report import build as build_report
from fmcluster.planner.search import evaluate
from fmcluster.planner.steptime import step


def moe64():
    """A 64-expert MoE (DeepSeek-style expert sizes) that fits 64 GPUs."""
    return build({"name": "moe64", "params": 60e9, "layers": 24, "hidden": 4096, "heads": 32, "vocab": 32000,
                  "experts": 64, "active_experts": 8, "expert_ffn": 1408, "seq": 4096}, "--model")


def alltoall(instance_type: str, count: int, tp: int, ep: int):
    hw = hardware(instance_type, count)
    lay = Layout(tp=tp, pp=1, dp=hw.gpus // tp, ep=ep, micro_batch=1, microbatches=4, seq=4096)
    st = step(moe64(), hw, lay, ZERO["zero1"], "selective", mfu=0.4)
    return next(x for x in st.collectives if x.kind == c.ALL_TO_ALL)


def test_gb200_ultraserver_keeps_expert_all_to_all_on_nvlink_where_p5_crosses_efa():
    # 64 GPUs either way: 16 p6e-gb200 instances in one 72-GPU NVLink domain, or 8 p5.48xlarge (8-GPU domains)
    gb = alltoall("p6e-gb200.36xlarge", 16, tp=1, ep=64)
    p5 = alltoall("p5.48xlarge", 8, tp=1, ep=64)
    assert gb.internode_s == 0 and gb.nvlink_s > 0 and gb.link == "NVLink"
    assert p5.internode_s > 0 and p5.link == "NVLink+EFA"
    # on p5, 56 of a rank's 63 peers sit in other domains; their share leaves through 50 GB/s of EFA per GPU
    per_call = p5.bytes_per_call
    assert p5.internode_s == pytest.approx(p5.calls * per_call * 56 / 64 / (3200 / 8 * 1e9 / 8))
    assert p5.seconds > 10 * gb.seconds


def test_an_expert_group_inside_one_p5_node_stays_on_nvlink():
    assert alltoall("p5.48xlarge", 8, tp=1, ep=8).internode_s == 0
    assert alltoall("p5.48xlarge", 8, tp=2, ep=8).internode_s > 0  # tp x ep = 16 spans two nodes


def test_report_shows_ep_placement_for_both_domains():
    from helpers.planner import spec

    opts = PlanOptions()
    gb = build_report(spec("p6e-gb200.36xlarge", 16), moe64(), opts)["jobs"][0]["expert_parallel"]
    p5 = build_report(spec("p5.48xlarge", 8), moe64(), opts)["jobs"][0]["expert_parallel"]
    assert all(e["stays_on_nvlink"] for e in gb)
    wide = next(e for e in p5 if e["ep"] == 64)
    assert not wide["stays_on_nvlink"] and wide["share_across_domains"] == pytest.approx(56 / 63, abs=1e-4)


def test_hierarchical_all_reduce_splits_nvlink_and_efa():
    nvl, net = c.hierarchical(c.ALL_REDUCE, 8e9, ranks=16, per_domain=8, nvlink_bps=450e9, internode_bps=50e9)
    assert nvl == pytest.approx(2 * 7 / 8 * 8e9 / 450e9)
    assert net == pytest.approx(2 * 1 / 2 * (8e9 / 8) / 50e9)
    assert c.hierarchical(c.ALL_REDUCE, 8e9, 8, 8, 450e9, 50e9)[1] == 0


def test_members_per_domain_follow_the_rank_stride():
    assert c.members_per_domain(ranks=16, stride=1, domain=8, gpus=32) == 8
    assert c.members_per_domain(ranks=16, stride=8, domain=8, gpus=128) == 1  # dp with tp = 8: one rank per node
    assert c.members_per_domain(ranks=64, stride=1, domain=72, gpus=64) == 64


def test_a_group_that_straddles_an_nvlink_domain_is_the_one_the_step_waits_for():
    """144 GB200 GPUs in two 72-GPU domains: 16-rank groups in rank order put ranks 64-79 across the boundary, 8 on
    each side; 8-rank groups tile the domain."""
    assert c.members_per_domain(ranks=16, stride=1, domain=72, gpus=144) == 8
    assert c.members_per_domain(ranks=8, stride=1, domain=72, gpus=144) == 8
    assert c.members_per_domain(ranks=36, stride=2, domain=72, gpus=144) == 36


def test_zero3_gathers_weights_every_micro_batch():
    hw = hardware("p5.48xlarge", 4)
    m = preset("llama3-8b")
    lay = Layout(tp=1, pp=1, dp=32, ep=1, micro_batch=1, microbatches=4, seq=8192)
    z1 = step(m, hw, lay, ZERO["zero1"], "none", 0.4)
    z3 = step(m, hw, lay, ZERO["zero3"], "none", 0.4)
    gather = next(x for x in z3.collectives if x.kind == c.ALL_GATHER)
    assert gather.calls == 2 * 4  # forward and backward, each micro-batch
    assert sum(x.seconds for x in z3.collectives) > sum(x.seconds for x in z1.collectives)
    full = step(m, hw, lay, ZERO["zero3"], "full", 0.4)
    assert next(x for x in full.collectives if x.kind == c.ALL_GATHER).calls == 3 * 4
    assert full.compute_s == pytest.approx(z3.compute_s * 8 / 6)


def test_zero2_reduce_scatters_gradients_every_micro_batch():
    """Sharded gradients cannot accumulate whole, so stage 2 reduces after every backward pass
    (deepspeedai/DeepSpeed#2252); with one micro-batch it moves what ZeRO-1's all-reduce does."""
    hw = hardware("p5.48xlarge", 4)
    m = preset("llama3-8b")
    lay = Layout(tp=1, pp=1, dp=32, ep=1, micro_batch=1, microbatches=4, seq=8192)
    z1 = step(m, hw, lay, ZERO["zero1"], "selective", 0.4)
    z2 = step(m, hw, lay, ZERO["zero2"], "selective", 0.4)
    rs = next(x for x in z2.collectives if x.kind == c.REDUCE_SCATTER)
    assert rs.calls == 4 and next(x for x in z2.collectives if x.kind == c.ALL_GATHER).calls == 1
    assert sum(x.seconds for x in z2.collectives) > sum(x.seconds for x in z1.collectives)
    one = Layout(tp=1, pp=1, dp=32, ep=1, micro_batch=1, microbatches=1, seq=8192)
    assert sum(x.seconds for x in step(m, hw, one, ZERO["zero2"], "selective", 0.4).collectives) == pytest.approx(
        sum(x.seconds for x in step(m, hw, one, ZERO["zero1"], "selective", 0.4).collectives))


def test_pipeline_bubble_and_tensor_parallel_traffic():
    hw = hardware("p5.48xlarge", 4)
    m = preset("llama3-70b")
    lay = Layout(tp=8, pp=4, dp=1, ep=1, micro_batch=1, microbatches=16, seq=8192)
    st = step(m, hw, lay, ZERO["ddp"], "selective", 0.4)
    assert st.bubble_s == pytest.approx(st.compute_s * 3 / 16)  # Narayanan et al. 2021: (p - 1) / m
    tp = next(x for x in st.collectives if x.group == "tp")
    assert tp.internode_s == 0 and tp.calls == 4 * 20 * 16
    pp = next(x for x in st.collectives if x.group == "pp")
    assert pp.internode_s > 0  # a stage is one 8-GPU node: the next stage is across EFA
    assert st.bound_s == max(st.compute_s + st.bubble_s, st.nvlink_s, st.internode_s)
    assert st.serial_s >= st.bound_s


def test_layouts_respect_domains_heads_and_experts():
    hw = hardware("p5.48xlarge", 4)
    for lay in enumerate_layouts(preset("mixtral-8x7b"), hw, 4 * 2**20, 1):
        assert lay.tp <= 8 and 32 % lay.tp == 0 and lay.gpus == 32
        assert 8 % lay.ep == 0 and (lay.dp * lay.cp * (lay.tp // lay.expert_tp)) % lay.ep == 0
        assert lay.expert_tp in (1, lay.tp) and 4096 // lay.cp >= 2048
    gb = hardware("p6e-gb200.36xlarge", 18)
    assert max(lay.tp for lay in enumerate_layouts(preset("llama3-70b"), gb, 4 * 2**20, 1)) == 8


def test_stage_parameters_add_up():
    m = preset("mixtral-8x7b")
    whole = stage_params(m, Layout(1, 1, 8, 1, 1, 1, 4096))
    assert whole["dense"] + whole["expert"] == pytest.approx(m.params)
    split = stage_params(m, Layout(2, 4, 1, 1, 1, 1, 4096))
    assert split["layers"] == 8 and split["expert"] == pytest.approx(m.expert_params / 4 / 2)


def test_layouts_are_ranked_by_time_per_token_not_per_step():
    """DeepSeek-V3 on one GB200 NVL72: layouts round the 4M-token batch to their data-parallel width differently
    (4,423,680 tokens against 4,194,304), so the fastest step is not the fastest per token."""
    hw = of_group(spec("p6e-gb200.36xlarge", 18).node_groups[0], "bf16")
    fitting = [c for c in evaluate(preset("deepseek-v3"), hw, 4194304, 1, 0.4, "deepspeed") if c.fits]
    per_token = [c.estimate.seconds / c.step.tokens for c in fitting]
    assert len({c.step.tokens for c in fitting[:3]}) > 1 and per_token == sorted(per_token)


def test_each_shown_layout_reports_activations_with_and_without_recomputation():
    report = build_report(spec("p5.48xlarge", 2), preset("llama3-8b"), PlanOptions())
    mem = report["jobs"][0]["best"][0]["memory"]
    by = {policy: f["value"] for policy, f in mem["activations_by_recompute"].items()}
    assert by["none"] > by["selective"] > by["full"] > 0
    assert mem["activations"]["value"] == by[report["jobs"][0]["best"][0]["layout"]["recompute"]]

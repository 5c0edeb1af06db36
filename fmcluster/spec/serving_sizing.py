"""What one serving replica holds and how fast it runs: weights and KV cache per GPU, concurrent sequences, the
prefill bound (FLOPs) and the decode bound (HBM bandwidth) per step, calibrated against published vLLM and SGLang
runs (docs/serving.md, "Sizing" and "Calibration"; fmcluster/planner/serving/ evaluates the table).

A replica is ``tp x pp`` GPUs of one instance type serving one model. The formulas, per GPU of a replica:

- weights: ``(params - vocab x hidden) x bytes(weights) + vocab x hidden x 2`` (the input embedding and output layer
  stay 16-bit in FP8 checkpoints), over ``tp x pp``;
- KV cache: ``UTILIZATION x HBM - weights - RESERVE``, each token taking ``kv_values x bytes(kv) / (kv_split x pp)``;
- a decode step of ``b`` sequences at context ``c``: ``max(bytes read / (ETA_HBM x HBM bandwidth), FLOPs /
  (ETA_MM x peak)) + 2 x layers x ALLREDUCE_S`` (tp > 1) per stage, stages in turn, plus ``STEP_S``; bytes read are
  the weights the step touches (for a mixture of experts, the share of routed experts ``b`` tokens select) and ``b x c``
  tokens of cache;
- a prefill of ``s`` tokens: ``(2 x active x s / peak + layers x attention_width x s^2 / peak(bf16)) / ETA_MM`` over
  the replica's GPUs, plus the activations' all-reduce over NVLink.

ETA_HBM, ETA_MM, STEP_S and ALLREDUCE_S are the four fitted constants; UTILIZATION and RESERVE are the engines'
defaults, not fitted. Pure functions of the spec's data: the spec checks fit with them, `plan --serve` sizes with them,
and the Kubernetes kinds resolve ``parallelism: plan`` with them, so all three agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from fmcluster import catalog
from fmcluster.spec.serving_models import Architecture

GIB = 2**30
BYTES = {"bf16": 2.0, "fp8": 1.0}
# vLLM's --gpu-memory-utilization default (SGLang's --mem-fraction-static auto-sizes near it): the share of HBM the
# engine takes for weights, activations and the KV cache.
UTILIZATION = 0.90
# Activations of one scheduled batch (max_num_batched_tokens 8192), CUDA graphs and NCCL buffers per GPU, outside
# the KV cache: the engines profile it at start; 1 GiB is the allowance (vLLM 0.11 serves Qwen3-32B in BF16, 65.5 GB, with
# its 40,960-token context on one 80 GB H100, which leaves no more) (docs/serving.md, "Memory").
RESERVE_BYTES = 1 * GIB
# vLLM's default --max-num-seqs on GPUs with 70 GiB or more (vllm/engine/arg_utils.py, get_batch_defaults).
MAX_SEQS = 1024

# Fitted by least squares of the log error over the published runs of fmcluster/planner/data/serving_calibration.json
# (docs/serving.md, "Calibration"): the share of HBM bandwidth a decode step streams at, the share of the dense peak
# matrix work runs at, the fixed cost of one engine step (scheduling, sampling, launches), and one tensor-parallel
# all-reduce's latency (two per layer per step).
ETA_HBM = 0.82
ETA_MM = 0.35
STEP_S = 2.3e-3
ALLREDUCE_S = 50e-6
# The routed experts' grouped kernels, against the dense ones: the share of ETA_HBM and ETA_MM a mixture of experts'
# routed weights stream and multiply at (each expert sees a few tokens of a step, in small, ragged GEMMs).
ETA_MOE = 0.37
# FP8 GEMMs against BF16's: the share of the FP8 peak's gain over the BF16 peak that serving's matrix shapes realize.
FP8_GAIN = 0.31


@dataclass(frozen=True)
class Gpu:
    """One GPU of an instance type, in the units the formulas use."""

    instance_type: str
    name: str
    per_node: int
    hbm_bytes: float
    hbm_bytes_s: float
    bf16_flops: float
    fp8_flops: float
    nvlink_bytes_s: float  # one direction
    efa_bytes_s: float  # the node's EFA, one direction (0: none)

    def peak(self, weights: str) -> float:
        """The dense matrix rate of a weight precision: FP8 realizes FP8_GAIN of its peak's doubling over BF16."""
        if weights == "fp8":
            return self.bf16_flops + FP8_GAIN * (self.fp8_flops - self.bf16_flops)
        return self.bf16_flops


def gpu(instance_type: str) -> Gpu:
    t = catalog.get(instance_type)
    return Gpu(instance_type, t.gpu or "none", t.gpus, t.gpu_memory_mib * 2**20, t.hbm_tbps * 1e12,
               t.bf16_dense_tflops * 1e12, t.fp8_dense_tflops * 1e12, t.nvlink_gbs_per_gpu / 2 * 1e9,
               t.efa_gbps / 8 * 1e9)


@dataclass(frozen=True)
class Load:
    concurrency: float  # sequences in flight
    capacity: int  # sequences the cache holds
    step_s: float  # one decode step
    prefill_s: float  # one prompt's compute
    rate: float  # requests per second the replica completes
    output_tps: float
    total_tps: float
    ttft_s: float  # unqueued: the prompt's prefill and one step
    tpot_s: float  # a decode step plus the prefills that share the steps


@dataclass(frozen=True)
class Replica:
    """`arch` on ``tp x pp`` GPUs of `hw`, weights and cache at the precisions named ("bf16" or "fp8")."""

    arch: Architecture
    hw: Gpu
    tp: int = 1
    pp: int = 1
    weights: str = "bf16"
    kv: str = "bf16"
    utilization: float = UTILIZATION  # the engine's share of HBM (--gpu-memory-utilization)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def nodes(self) -> int:
        return max(1, math.ceil(self.gpus / max(self.hw.per_node, 1)))

    # memory ---------------------------------------------------------------------------------------------------
    @property
    def weight_bytes(self) -> float:
        """Every weight of the model (whole replica)."""
        a = self.arch
        embeddings = 2 * a.head_params
        return (a.params - embeddings) * BYTES[self.weights] + embeddings * 2

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.weight_bytes / self.gpus

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        a = self.arch
        return a.kv_values_per_token() * BYTES[self.kv] / (a.kv_split(self.tp) * self.pp)

    @property
    def kv_bytes_per_gpu(self) -> float:
        """HBM left for the cache on each GPU (negative: the weights alone do not fit)."""
        return self.utilization * self.hw.hbm_bytes - self.weight_bytes_per_gpu - RESERVE_BYTES

    @property
    def kv_tokens(self) -> int:
        """Tokens of cache the replica holds."""
        return max(0, int(self.kv_bytes_per_gpu / self.kv_bytes_per_token_per_gpu))

    def sequences(self, tokens_each: float) -> int:
        """Sequences of `tokens_each` the cache holds at once (bounded by the engine's default max-num-seqs)."""
        return min(MAX_SEQS, int(self.kv_tokens / max(tokens_each, 1.0)))

    def fits(self, context: int) -> bool:
        """The weights fit and the cache holds at least one sequence of `context` tokens."""
        return self.kv_bytes_per_gpu > 0 and self.kv_tokens >= context

    # time -----------------------------------------------------------------------------------------------------
    def _allreduce_s(self, tokens: float, layers: float) -> float:
        """Two all-reduces of the activations per layer (attention and MLP outputs) over NVLink, ring bandwidth."""
        if self.tp == 1:
            return 0.0
        per = 2.0 * tokens * self.arch.hidden * 2.0 * (self.tp - 1) / self.tp / max(self.hw.nvlink_bytes_s, 1.0)
        return 2.0 * layers * (ALLREDUCE_S + per)

    def _decode_parts(self, batch: float, context: float) -> Tuple[float, float]:
        """(memory time, compute time) of one stage's decode step of `batch` sequences at mean context `context`."""
        a, hw = self.arch, self.hw
        batch = max(batch, 1.0)
        dense = a.params - a.expert_params - 2 * a.head_params  # attention, norms, dense and shared MLPs
        routed = a.expert_params * a.expert_fraction_read(batch)  # the routed experts' weights the step touches
        read = ((dense + routed / ETA_MOE) * BYTES[self.weights] + a.head_params * 2) / self.gpus
        read += batch * context * self.kv_bytes_per_token_per_gpu
        flops_dense, flops_routed = self._matmul_flops(batch)
        flops_attn = 2.0 * batch * a.layers * a.attention_width * context / self.gpus
        compute = ((flops_dense + flops_routed / ETA_MOE) / self.gpus / hw.peak(self.weights)
                   + flops_attn / hw.bf16_flops) / ETA_MM
        return read / (ETA_HBM * hw.hbm_bytes_s), compute

    def decode_step_s(self, batch: float, context: float) -> float:
        """One decode step of `batch` sequences at mean context `context`: every stage in turn, then the step cost."""
        memory, compute = self._decode_parts(batch, context)
        stage = max(memory, compute) + self._allreduce_s(batch, self.arch.layers / self.pp)
        return self.pp * stage + STEP_S

    def prefill_s(self, tokens: float) -> float:
        """Compute time of one prompt of `tokens` on the replica (its latency: stages in turn)."""
        a, hw = self.arch, self.hw
        flops_dense, flops_routed = self._matmul_flops(tokens)
        flops_mm = (flops_dense + flops_routed / ETA_MOE) / self.tp
        flops_attn = a.layers * a.attention_width * tokens * tokens / self.tp
        return ((flops_mm / hw.peak(self.weights) + flops_attn / hw.bf16_flops) / ETA_MM
                + self._allreduce_s(tokens, a.layers))

    def _matmul_flops(self, tokens: float) -> Tuple[float, float]:
        """Matrix FLOPs of `tokens` through the whole model: (dense and shared layers with the output layer, the
        routed experts each token is sent to)."""
        a = self.arch
        routed = a.expert_params * a.active_experts / a.experts if a.is_moe else 0.0
        return 2.0 * tokens * (a.active - routed), 2.0 * tokens * routed

    # serving --------------------------------------------------------------------------------------------------
    def load(self, prompt: float, output: float, concurrency: Optional[float] = None) -> Load:
        """Steady state with `concurrency` requests in flight (default: all the cache and the engine take), each a
        prompt of `prompt` and `output` tokens, aggregated: prefill chunks share the engine's steps with the decodes,
        which ride along a compute-bound chunk for their own compute only (one weight read serves both).

        Replica-seconds per request: ``max(output x step / c, prefill + output x decode compute / c, (prefill + output
        x step) / c)``, the last the lone request whose prefill nothing overlaps; time per output token in a closed
        loop of ``c``: ``(c x that - TTFT) / output`` (Little's law), TTFT the unqueued ``prefill + step``."""
        cap = self.sequences(prompt + output / 2)
        c = max(1.0, float(cap if concurrency is None else min(concurrency, cap)))
        context = prompt + output / 2
        step = self.decode_step_s(c, context)
        _, compute = self._decode_parts(c, context)
        pf = self.prefill_s(prompt)
        stages = pf / self.pp  # a pipeline's stages work on different prompts at once
        per_request = max(output * step / c, stages + output * self.pp * compute / c, (stages + output * step) / c)
        rate = 1.0 / per_request
        ttft = pf + step
        tpot = max(step, (c * per_request - ttft) / max(output, 1.0))
        return Load(concurrency=c, capacity=cap, step_s=step, prefill_s=pf, rate=rate, output_tps=rate * output,
                    total_tps=rate * (prompt + output), ttft_s=ttft, tpot_s=tpot)




# Tensor-parallel sizes a replica takes within one node.
TP_SIZES = (1, 2, 4, 8)


def operating_point(r: Replica, prompt: float, output: float, ttft_s: float, tpot_s: float) -> Optional[Load]:
    """The most concurrent sequences one replica runs within both SLOs (aggregated; TTFT unqueued), or None when
    even one misses them: time per output token grows with the sequences in flight, so the first that misses bounds
    the search."""
    cap = r.sequences(prompt + output / 2)
    if cap < 1:
        return None
    best: Optional[Load] = None
    lo, hi = 1, cap
    while lo <= hi:
        mid = (lo + hi) // 2
        load = r.load(prompt, output, mid)
        if load.tpot_s <= tpot_s and load.ttft_s <= ttft_s:
            best, lo = load, mid + 1
        else:
            hi = mid - 1
    return best


@dataclass(frozen=True)
class Sized:
    """Replicas of one layout serving a rate within the SLOs."""

    replica: Replica
    load: Load  # one replica at its operating point
    replicas: int

    @property
    def gpus(self) -> int:
        return self.replicas * self.replica.gpus


def aggregated(replicas: List[Replica], prompt: float, output: float, rate: float, ttft_s: float,
               tpot_s: float) -> List[Sized]:
    """Each layout that fits and meets the SLOs, with the replicas `rate` needs; fewest GPUs first, then the
    smaller tensor size."""
    out = []
    for r in replicas:
        if not r.fits(int(prompt + output)):
            continue
        load = operating_point(r, prompt, output, ttft_s, tpot_s)
        if load is not None:
            out.append(Sized(r, load, max(1, math.ceil(rate / load.rate))))
    return sorted(out, key=lambda s: (s.gpus, s.replica.gpus))


@dataclass(frozen=True)
class Disaggregated:
    """Prefill and decode pools serving a rate within the SLOs; the KV cache crosses EFA between them."""

    prefill: Replica
    prefills: int
    decode: Replica
    decode_load: Load  # one decode replica at its operating point (decode steps only)
    decodes: int
    transfer_s: float  # one prompt's KV cache from a prefill to a decode replica over EFA
    ttft_s: float

    @property
    def gpus(self) -> int:
        return self.prefills * self.prefill.gpus + self.decodes * self.decode.gpus


def kv_transfer_s(prefill: Replica, decode: Replica, prompt: float) -> float:
    """One prompt's cache over the slower side's share of its nodes' EFA (each replica's GPUs' share)."""
    values = prefill.arch.kv_values_per_token() * prompt * BYTES[prefill.kv]
    share = min(r.hw.efa_bytes_s * min(r.gpus, r.hw.per_node) / max(r.hw.per_node, 1) for r in (prefill, decode))
    return values / share if share > 0 else float("inf")


def disaggregated(prefills: List[Replica], decodes: List[Replica], prompt: float, output: float, rate: float,
                  ttft_s: float, tpot_s: float) -> List[Disaggregated]:
    """Each pair of layouts meeting the SLOs: prefill replicas busy prefilling (TTFT: prefill, transfer, one decode
    step), decode replicas running decode steps alone at the most sequences whose step meets the TPOT SLO; fewest
    GPUs first."""
    out = []
    context = prompt + output / 2
    for d in decodes:
        if not d.fits(int(prompt + output)):
            continue
        cap = d.sequences(context)
        c = 0
        lo, hi = 1, cap
        while lo <= hi:
            mid = (lo + hi) // 2
            if d.decode_step_s(mid, context) <= tpot_s:
                c, lo = mid, mid + 1
            else:
                hi = mid - 1
        if c < 1:
            continue
        step = d.decode_step_s(c, context)
        dl = Load(concurrency=c, capacity=cap, step_s=step, prefill_s=0.0, rate=c / (output * step),
                  output_tps=c / step, total_tps=c * (prompt + output) / (output * step), ttft_s=0.0, tpot_s=step)
        for p in prefills:
            if not p.fits(int(prompt)):
                continue
            transfer = kv_transfer_s(p, d, prompt)
            pf = p.prefill_s(prompt)
            ttft = pf + transfer + step
            if ttft > ttft_s:
                continue
            out.append(Disaggregated(p, max(1, math.ceil(rate * pf / p.pp)), d, dl,
                                     max(1, math.ceil(rate / dl.rate)), transfer, ttft))
    return sorted(out, key=lambda x: (x.gpus, x.prefill.gpus + x.decode.gpus))


def layouts(arch: Architecture, hw: Gpu, weights: str, kv: str) -> List[Replica]:
    """One-node layouts (tensor sizes dividing the heads, within the node's GPUs)."""
    return [Replica(arch, hw, tp, 1, weights, kv) for tp in TP_SIZES if tp <= hw.per_node and arch.heads % tp == 0]

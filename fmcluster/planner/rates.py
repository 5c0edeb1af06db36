"""How fast the GPUs compute a layout's step: calibrated shares of the dense peak (docs/planning.md, "Calibration").

compute = GEMM FLOPs / (GEMM peak x GEMM_SHARE[precision] x framework x width)
        + GEMM FLOPs / (BF16 peak x GEMM_SHARE["bf16"] x framework) x HIDDEN_HALF / h
        + attention FLOPs / (BF16 peak x ATTENTION_SHARE x framework x block)

- GEMM FLOPs are 6N per token (N the active parameters less the input embedding), attention's 3 L s a (d_qk + d_v)
  under a causal mask (steptime.flops_per_token); full recomputation repeats the forward pass (x 4/3), selective
  recomputation re-runs the norms and the activation function (SELECTIVE_COST of the compute).
- The second term is the elementwise work (norms, activation functions, residual adds, casts): memory-bound, per GEMM
  FLOP it falls as 1/h, so small models spend more of their step on it ("MFU increases from 41% to 47-48% with
  model size ... larger GEMMs have higher arithmetic intensity", Megatron-LM README, Training speed and scalability).
- FP8 speeds up what it runs: the GEMMs, at the FP8 peak and GEMM_SHARE["fp8"]. Attention and the elementwise work
  stay at BF16's rates; communication, memory and the optimizer step are unchanged.
- GEMM_SHARE folds in what scales with the GEMMs (the optimizer step, kernel launches) for Megatron Core with
  Transformer Engine; FRAMEWORK scales all three terms for other frameworks, GENERATION per GPU generation. The
  constants are fit across the published runs of data/calibration.json (least squares of the log error, each run on
  its published layout: GEMM_SHARE bf16 and fp8, ATTENTION_SHARE, FRAMEWORK["fsdp"], HIDDEN_HALF, five numbers for
  26 runs); calibration.py holds the table and the test holds the error band.
- width: a GEMM whose narrowest per-GPU side w is under FULL_WIDTH loses w/(w + TILE_LOSS) relative to FULL_WIDTH
  (tile and wave quantization, NVIDIA's Matrix Multiplication Background guide; the constants are assumptions). The
  sides: heads x head size / tp, FFN / tp, expert FFN / etp, a micro-batch's tokens b s / cp, and the tokens each
  local expert gets, b s k ep / (cp E).
- block: flash attention over a key block of n tokens runs at n/(n + ATTENTION_BLOCK_HALF) of its long-sequence rate:
  FlashAttention-3's forward on H100 at head size 128 measured 430, 517, 566, 590, 614 and 621 TFLOP/s at 512, 1K,
  2K, 4K, 8K and 16K tokens (pytorch/benchmark commit ff65cb67, "Fix dimension order for FlashAttention-3"), which
  n/(n + 226) follows within 2%. Without context parallelism a block is the sequence; ring attention's
  load-balanced causal split computes blocks of s/(2 cp) tokens.

--mfu replaces the calibrated shares with one share of the chosen precision's peak for every FLOP (the planner's
earlier model, narrow GEMMs still charged), for a team that knows its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from fmcluster.planner.hardware import Hardware
from fmcluster.planner.layouts import Layout
from fmcluster.planner.models import Model

GEMM_SHARE = {"bf16": 0.536, "fp8": 0.502}  # of the precision's dense peak, Megatron Core + Transformer Engine
ATTENTION_SHARE = 0.477  # causal flash attention forward and backward, of the BF16 peak (FA3's forward peaks at 0.75)
FRAMEWORK = {"megatron": 1.0, "fsdp": 0.702, "deepspeed": 0.702}
CALIBRATED = {"megatron": "calibrated on Megatron Core / NeMo and Meta's Llama 3 runs",
              "fsdp": "calibrated on torchtitan's FSDP2 runs (H100 at 500 W: conservative for a 700 W P5)",
              "deepspeed": "uncalibrated: no published DeepSpeed run on H100, H200 or B200 found; FSDP2's shares "
                           "(PyTorch modules without Transformer Engine) stand in"}
GENERATION = {"hopper": 1.0, "blackwell": 1.0}  # the two B200 runs land within 6% on Hopper's shares (calibration)
HIDDEN_HALF = 644.0  # elementwise work per GEMM FLOP falls as 1/h: it costs HIDDEN_HALF/h of the BF16 GEMM time
SELECTIVE_COST = 0.02  # re-running two norms and the activation function: memory-bound, a few % of a forward pass
FULL_WIDTH = 1024  # GEMMs at least this narrow side run at the calibrated share
TILE_LOSS = 64  # half a 128-wide tile lost on average to tile quantization
ATTENTION_BLOCK_HALF = 226  # tokens: flash attention over n keys runs at n/(n + 226) of its long-sequence rate


@dataclass(frozen=True)
class Compute:
    gemm_s: float
    attention_s: float
    gemm_rate: float  # FLOP/s per GPU the GEMMs run at
    attention_rate: float
    width_efficiency: float
    block_efficiency: float
    calibrated: bool  # False when --mfu replaced the calibrated shares
    elementwise_s: float = 0.0  # norms, activations, residuals: HIDDEN_HALF / h of the GEMMs' time at BF16

    @property
    def total(self) -> float:
        return self.gemm_s + self.elementwise_s + self.attention_s

    def summary(self) -> Dict[str, Any]:
        return {"gemm_s": self.gemm_s, "elementwise_s": self.elementwise_s, "attention_s": self.attention_s,
                "gemm_tflops_per_gpu": self.gemm_rate / 1e12,
                "attention_tflops_per_gpu": self.attention_rate / 1e12, "width_efficiency": self.width_efficiency,
                "block_efficiency": self.block_efficiency, "calibrated": self.calibrated}


def gemm_flops_per_token(model: Model) -> float:
    return 6.0 * (model.active_params - model.vocab * model.hidden)


def attention_flops_per_token(model: Model) -> float:
    return 3.0 * model.layers * model.seq * model.attention_width


def width_efficiency(model: Model, layout: Layout) -> float:
    widths = [model.heads * model.head_dim / layout.tp, layout.micro_batch * model.seq / layout.cp]
    if model.ffn and (not model.is_moe or model.dense_layers):
        widths.append(model.ffn / layout.tp)
    if model.is_moe:
        widths.append((model.expert_ffn or model.ffn or model.hidden) / layout.expert_tp)
        widths.append(expert_rows(model, layout))
    w = min(widths)
    return min(1.0, (w / (w + TILE_LOSS)) / (FULL_WIDTH / (FULL_WIDTH + TILE_LOSS)))


def expert_rows(model: Model, layout: Layout) -> float:
    """Tokens each local expert's GEMM gets per micro-batch: the expert group's routed copies over the experts. With
    no expert parallelism every rank runs all experts on its own few tokens each."""
    tokens = layout.micro_batch * model.seq / layout.cp  # one rank's tokens, all-gathered over tensor parallelism
    per_rank = tokens / (layout.tp // layout.expert_tp)  # folded expert groups take sequence-parallel shards
    return per_rank * model.active_experts * layout.ep / model.experts


def block_efficiency(model: Model, layout: Layout) -> float:
    """Flash attention's rate on the key blocks it is given, relative to a long sequence (see the module doc); ring
    attention's load-balanced split gives each rank two chunks of s/(2 cp) tokens, each a block of its own."""
    n = model.seq / (2 * layout.cp) if layout.cp > 1 else float(model.seq)
    return n / (n + ATTENTION_BLOCK_HALF)


def recompute_factor(recompute: str) -> float:
    """Compute re-spent on recomputation: a whole forward pass (full), the norms and activation (selective)."""
    return 4.0 / 3 if recompute == "full" else 1.0 + SELECTIVE_COST if recompute == "selective" else 1.0


def compute(model: Model, hw: Hardware, layout: Layout, recompute: str, framework: str = "megatron",
            mfu: Optional[float] = None) -> Compute:
    tokens = float(layout.tokens_per_step)
    extra = recompute_factor(recompute)
    gemm, attention = gemm_flops_per_token(model) * tokens * extra, attention_flops_per_token(model) * tokens * extra
    width, block = width_efficiency(model, layout), block_efficiency(model, layout)
    if mfu is not None:
        block = 1.0
        g_rate, a_rate = hw.peak_flops * mfu * width, hw.peak_flops * mfu
    else:
        scale = FRAMEWORK.get(framework, FRAMEWORK["deepspeed"]) * GENERATION.get(hw.arch, 1.0)
        g_rate = hw.peak_flops * GEMM_SHARE[hw.precision] * scale * width
        a_rate = hw.attention_peak_flops * ATTENTION_SHARE * scale * block
    gpus = max(hw.gpus, 1)
    elementwise = 0.0
    if mfu is None:  # norms, activations, residuals: memory-bound, FP8 does not speed them up
        elementwise = gemm / (gpus * elementwise_rate(hw, framework)) * HIDDEN_HALF / model.hidden
    return Compute(gemm / (gpus * g_rate), attention / (gpus * a_rate), g_rate, a_rate, width, block, mfu is None,
                   elementwise)


def elementwise_rate(hw: Hardware, framework: str) -> float:
    """The BF16 GEMM rate the elementwise work is measured against (HIDDEN_HALF / h of it)."""
    scale = FRAMEWORK.get(framework, FRAMEWORK["deepspeed"]) * GENERATION.get(hw.arch, 1.0)
    return hw.attention_peak_flops * GEMM_SHARE["bf16"] * scale

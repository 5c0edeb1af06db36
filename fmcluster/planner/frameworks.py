"""What each training framework keeps per parameter, what it shards, and in which precision its
data-parallel collectives move gradients and weights (bf16 mixed-precision training with Adam).

Megatron-LM / NeMo (Megatron Core distributed optimizer guide): bf16 weights, fp32 gradients
(the main_grad buffer, reduced in fp32), fp32 master weights + momentum + variance: 18 bytes
per parameter, or 6 + 12/d with the distributed optimizer, which shards only the optimizer
state; gradients are reduce-scattered in fp32 and the updated bf16 weights all-gathered.

PyTorch FSDP2 (`fully_shard`, MixedPrecisionPolicy): the sharded parameters stay in their
original fp32, the optimizer steps on them (Adam: 8 bytes of state), gradients are sharded in
fp32 after a reduce-scatter in reduce_dtype (fp32 here); bf16 weights are all-gathered for each
forward and backward. 16/d bytes at rest. DDP without sharding: 16 bytes, fp32 all-reduce.

Megatron-FSDP (Megatron Core, --data-parallel-sharding-strategy optim_grads | optim_grads_params, its user guide
docs/user-guide/features/megatron_fsdp.md): the same bf16 weights, fp32 gradients and fp32 optimizer state as the
distributed optimizer, with the gradients (2 + 16/d) or everything (18/d, weights gathered per layer) sharded;
NVIDIA's Llama 3 8B recipe runs the second (FSDP = 1 in the Megatron Bridge performance summary).

DeepSpeed ZeRO (Rajbhandari et al., arXiv:1910.02054 §3.1, §5): 2 + 2 + K, K = 12, bf16
gradients on the wire; stage 1 shards the optimizer state, 2 also gradients, 3 also weights.

Each framework also says how it splits layers unevenly over pipeline stages (the flag a layout whose layers do not
divide by pp x vp needs), its default pipeline schedule, and how it interleaves virtual stages (DeepSpeed's
PipelineModule runs 1F1B only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from fmcluster.planner.errors import PlanUsageError

# how the data-parallel collectives run
ALL_REDUCE_ONCE = "all-reduce"  # one gradient all-reduce per step
SCATTER_GATHER_ONCE = "reduce-scatter + all-gather"  # gradients scattered, updated weights gathered, once per step
SCATTER_EVERY_MICROBATCH = "reduce-scatter per micro-batch"  # sharded gradients cannot accumulate whole (ZeRO-2)
GATHER_FOR_COMPUTE = "all-gather per pass"  # weights gathered for each forward and backward (ZeRO-3 / FSDP)


@dataclass(frozen=True)
class Sharding:
    key: str
    label: str
    weight_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    shard_weights: bool
    shard_grads: bool
    shard_optimizer: bool
    grad_wire_bytes: int  # bytes per gradient element the data-parallel reduction sends
    weight_wire_bytes: int  # bytes per weight element an all-gather sends
    pattern: str
    pipeline: str = "any"  # "without": only with pp = 1; "with": only with pp > 1 (the framework's own choice)
    saved_weight_bytes: int = -1  # bytes of weights a checkpoint holds; -1: weight_bytes

    @property
    def checkpoint_weight_bytes(self) -> int:
        return self.weight_bytes if self.saved_weight_bytes < 0 else self.saved_weight_bytes

    @property
    def checkpoint_optimizer_bytes(self) -> int:
        return self.optimizer_bytes - (self.checkpoint_weight_bytes - self.weight_bytes)

    def allowed(self, pp: int) -> bool:
        return self.pipeline == "any" or (self.pipeline == "with") == (pp > 1)

    @property
    def bytes_per_param(self) -> int:
        return self.weight_bytes + self.grad_bytes + self.optimizer_bytes

    def formula(self) -> str:
        """Bytes per parameter with d data-parallel ranks, e.g. '6 + 12/d'."""
        whole = sum(b for b, s in ((self.weight_bytes, self.shard_weights), (self.grad_bytes, self.shard_grads),
                                   (self.optimizer_bytes, self.shard_optimizer)) if not s)
        split = self.bytes_per_param - whole
        if not split:
            return str(whole)
        return f"{split}/d" if not whole else f"{whole} + {split}/d"


@dataclass(frozen=True)
class Framework:
    key: str
    label: str
    shardings: Tuple[Sharding, ...]
    source: str
    uneven_stages: str = ""  # the option that splits layers unevenly over pipeline stages; "" = layers must divide
    default_schedule: str = "1F1B"
    interleaving: str = ""  # the option that interleaves virtual stages; "" = the framework runs plain 1F1B only
    conventional: Tuple[Tuple[str, ...], ...] = ()  # sharding tiers in the order a team reaches for them

    def sharding_rank(self, key: str) -> int:
        return next((i for i, tier in enumerate(self.conventional) if key in tier), len(self.conventional))

    def sharding(self, key: str) -> Sharding:
        for s in self.shardings:
            if s.key == key:
                return s
        raise KeyError(key)


MEGATRON = Framework("megatron", "Megatron-LM / NeMo (bf16 weights, fp32 gradients)", (
    Sharding("ddp", "Megatron DDP", 2, 4, 12, False, False, False, 4, 2, ALL_REDUCE_ONCE),
    Sharding("distopt", "distributed optimizer", 2, 4, 12, False, False, True, 4, 2, SCATTER_GATHER_ONCE),
    Sharding("optim_grads", "Megatron-FSDP optim_grads", 2, 4, 12, False, True, True, 4, 2, SCATTER_EVERY_MICROBATCH),
    Sharding("optim_grads_params", "Megatron-FSDP optim_grads_params", 2, 4, 12, True, True, True, 4, 2,
             GATHER_FOR_COMPUTE),
), "https://docs.nvidia.com/megatron-core/developer-guide/latest/distrib_optimizer.html",
    uneven_stages="--pipeline-model-parallel-layout",
    interleaving="--num-virtual-stages-per-pipeline-rank",
    conventional=(("distopt", "optim_grads"), ("ddp",), ("optim_grads_params",)))

FSDP = Framework("fsdp", "PyTorch FSDP2 (fp32 sharded weights, bf16 compute, fp32 gradient reduction)", (
    Sharding("ddp", "PyTorch DDP", 4, 4, 8, False, False, False, 4, 2, ALL_REDUCE_ONCE),
    Sharding("fsdp", "FSDP2 full shard", 4, 4, 8, True, True, True, 4, 2, GATHER_FOR_COMPUTE, pipeline="without"),
    # with pipeline parallelism torchtitan does not reshard after forward (reshard_after_forward = not pp_enabled):
    # bf16 weights and fp32 gradients stay whole on the stage, gathered and reduced once per step
    Sharding("fsdp_pp", "FSDP2, weights kept after forward (pipeline parallel)", 2, 4, 12, False, False, True, 4, 2,
             SCATTER_GATHER_ONCE, pipeline="with", saved_weight_bytes=4),
), "https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html",
    uneven_stages="torchtitan --parallelism.pipeline_parallel_first_stage_less_layers",
    interleaving="torchtitan --parallelism.pipeline_parallel_schedule Interleaved1F1B",
    conventional=(("fsdp",), ("fsdp_pp",), ("ddp",)))

DEEPSPEED = Framework("deepspeed", "DeepSpeed ZeRO (bf16 weights and gradients, K = 12)", (
    Sharding("ddp", "no ZeRO (DDP)", 2, 2, 12, False, False, False, 2, 2, ALL_REDUCE_ONCE),
    Sharding("zero1", "ZeRO-1", 2, 2, 12, False, False, True, 2, 2, SCATTER_GATHER_ONCE),
    Sharding("zero2", "ZeRO-2", 2, 2, 12, False, True, True, 2, 2, SCATTER_EVERY_MICROBATCH),
    Sharding("zero3", "ZeRO-3", 2, 2, 12, True, True, True, 2, 2, GATHER_FOR_COMPUTE),
), "https://arxiv.org/abs/1910.02054",
    uneven_stages="PipelineModule(partition_method='parameters')",
    conventional=(("zero1", "zero2"), ("ddp",), ("zero3",)))

FRAMEWORKS: Dict[str, Framework] = {f.key: f for f in (MEGATRON, FSDP, DEEPSPEED)}
DEFAULT_FRAMEWORK = "megatron"  # what NVIDIA publishes its recipes with; its fp32 gradients are the conservative count


def framework(key: str) -> Framework:
    try:
        return FRAMEWORKS[key]
    except KeyError:
        raise PlanUsageError(f"--framework: {key!r} is not one of {', '.join(FRAMEWORKS)}") from None


def sharding_label(s: Sharding, dp: int) -> str:
    """What the report calls a sharding; with one data-parallel rank nothing is replicated or sharded."""
    return "no data parallelism" if dp == 1 else s.label

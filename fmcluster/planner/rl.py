"""`fmcluster plan --rl`: one reinforcement-learning step (GRPO or PPO, as veRL and NeMo RL run it) on a GPU node
group: memory per GPU of each role, the time of each phase, the step, and the GPU split that minimises it
(docs/post-training.md, "Sizing a step").

A step generates `samples` = prompts x group responses, scores them, and trains on them:

- rollout (decode-bound): each engine replica (`tp` GPUs) streams its weight shard from HBM once per decode step and
  the longest response sets the number of steps, TAIL x the mean response (at most the maximum); every generated
  token also costs its share of the GEMMs and of reading its context's KV cache:
      rollout = steps x (W / tp) / (B x BW_SHARE) + per_replica x mean x (2 N_act / tp / (F x DECODE_SHARE)
                + context x kv / tp / (B x BW_SHARE))    (+ the prompts' prefill at the training rate)
  W the weights' bytes (bf16), B the GPU's HBM bandwidth, F its dense BF16 peak, kv the KV cache bytes per token.
  A replica's KV cache holds as many sequences as the memory left beside its weights allows; more run in waves.
- training: the actor's update (forward and backward, recomputing activations), the old policy's and the reference's
  log-probabilities (a forward each) and, for PPO, the critic's update and values, over every sample's prompt and
  response, at the training planner's calibrated rates (rates.py: GEMM and attention shares of the peak, the
  framework's factor) times TRAIN_SHARE, what variable-length RL batches keep of them.
- weight sync: colocated, each GPU loads its rollout shard from the training shards over NVLink; split, every rollout
  node receives its replicas' shards over EFA.

Colocated (veRL's HybridEngine, NeMo RL's default) runs the phases one after another on every GPU. Split gives
`rollout_gpus` to generation and the rest to training and overlaps them one step off policy (veRL's one-step-off and
NeMo RL's async GRPO): the step is the slower side plus the sync. Two constants are fitted on
data/rl.json's dense runs (TAIL, TRAIN_SHARE; least squares of the log error); BW_SHARE and DECODE_SHARE are fixed
assumptions. Mixture-of-experts runs take 1.1-5x what it predicts (no term for expert dispatch in decode, routing
imbalance or MoE weight transfer): for them the figure is a lower bound, and plan says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.planner.errors import PlanUsageError
from fmcluster.planner.models import DATA, Model, build, preset
from fmcluster.planner.rates import GEMM_SHARE

GIB = 2**30
# Fixed (assumptions, docs/post-training.md): the share of HBM bandwidth decode kernels stream weights and KV at, and
# of the dense peak the batched decode GEMMs reach (the training planner's GEMM share).
BW_SHARE = 0.70
DECODE_SHARE = GEMM_SHARE["bf16"]
# Fitted on data/rl.json's dense runs, on-policy and one step off (scripts/fit_rl.py): the longest response of a
# step in units of the mean, and the share of the training planner's rates an RL batch's training phase keeps.
TAIL = 2.7
TRAIN_SHARE = 0.65
# The error on a run the constants were not fitted on: each dense run left out and the constants refitted on the
# rest (scripts/fit_rl.py --leave-one-out: -34%, -0%, +31%, +1%), rounded up; plan --rl says it beside the fit's band.
LEAVE_ONE_OUT = 0.35
# The rollout engine's share of HBM: colocated, beside the offloaded training states (veRL's gpu_memory_utilization,
# its perf guide: 0.5-0.7); on GPUs of its own, all but the allowance the training planner keeps (hardware.py).
ROLLOUT_MEMORY = {"colocated": 0.6, "split": 0.9}
# FSDP2 keeps fp32 parameters, gradients and Adam moments sharded: 16 bytes per parameter over the GPUs (the
# training planner's fsdp framework); a reference model in bf16, 2 bytes
TRAIN_BYTES, REF_BYTES = 16.0, 2.0
MLA_KV_WIDTH = 576  # DeepSeek-V3 caches the compressed latent and the decoupled key: 512 + 64 per token and layer


@dataclass(frozen=True)
class Gpus:
    """The GPUs a step runs on: `count` of one type."""

    instance: Any  # the catalog's InstanceType
    name: str
    count: int
    per_node: int
    peak_flops: float  # dense BF16, per GPU
    hbm_bytes: float
    hbm_bytes_s: float
    nvlink_bytes_s: float  # one direction, per GPU
    efa_bytes_s_per_node: float

    @classmethod
    def of(cls, instance: Any, count: int) -> Gpus:
        return cls(instance=instance, name=instance.gpu, count=count, per_node=instance.gpus,
                   peak_flops=instance.bf16_dense_tflops * 1e12,
                   hbm_bytes=instance.gpu_memory_mib * 2**20, hbm_bytes_s=instance.hbm_tbps * 1e12,
                   nvlink_bytes_s=instance.nvlink_gbs_per_gpu * 1e9 / 2, efa_bytes_s_per_node=instance.efa_gbps * 1e9 / 8)


@dataclass(frozen=True)
class Job:
    model: Model
    samples: int  # prompts x group: responses per step
    prompt: float  # mean prompt tokens
    response_mean: float
    response_max: float
    rollout_tp: int
    algorithm: str = "grpo"  # grpo (no critic) | ppo
    framework: str = "fsdp"
    train_shape: Optional[Dict[str, int]] = None  # tp, cp, pp, ep of training; None: the training planner's pick


def weight_bytes(model: Model) -> float:
    return 2.0 * model.params


def kv_bytes_per_token(model: Model) -> float:
    """K and V in bf16 for every layer (MLA: its compressed latent)."""
    if model.qk_head_dim:  # multi-head latent attention
        return 2.0 * model.layers * MLA_KV_WIDTH
    return 2.0 * 2 * model.layers * model.kv_heads * model.head_dim


def rollout_seconds(job: Job, gpus: Gpus, count: Optional[int] = None, mode: str = "colocated") -> float:
    """Infinite where the engine's weight shard does not fit its share of HBM (a larger tp is needed)."""
    n = count or gpus.count
    tp = job.rollout_tp
    replicas = max(1, n // tp)
    per_replica = job.samples / replicas
    bw = gpus.hbm_bytes_s * BW_SHARE
    shard = weight_bytes(job.model) / tp
    kv = kv_bytes_per_token(job.model)
    context = job.prompt + job.response_mean / 2
    room = (gpus.hbm_bytes * ROLLOUT_MEMORY[mode] - shard) * tp  # the replica's KV cache
    if room <= 0:
        return math.inf
    concurrent = room / (kv * (job.prompt + job.response_max)) if kv else per_replica
    waves = max(1, math.ceil(per_replica / max(concurrent, 1.0)))
    steps = min(job.response_max, TAIL * job.response_mean) * waves
    per_token = (2.0 * job.model.active_params / tp / (gpus.peak_flops * DECODE_SHARE)
                 + context * kv / tp / bw)
    prefill = per_replica * job.prompt * 2.0 * job.model.active_params / tp / (gpus.peak_flops * DECODE_SHARE)
    return steps * shard / bw + per_replica * job.response_mean * per_token + prefill


def train_layout(job: Job, gpus: Gpus, count: int, shape: Optional[Dict[str, int]] = None) -> Any:
    """The training planner's candidate for one pass (forward and backward) over the step's tokens on `count` GPUs:
    `shape` (tp, cp, pp, ep) pinned, as a published run gives it, else the planner's pick for the batch. Sequences
    are packed to the step's mean length (veRL's dynamic batch sizes, NeMo RL's sequence packing)."""
    from fmcluster.planner.hardware import of_type
    from fmcluster.planner.layouts import Layout
    from fmcluster.planner.models import with_seq
    from fmcluster.planner.pinned import evaluate_layout
    from fmcluster.planner.search import evaluate
    from fmcluster.planner.ties import tie_group

    seq = max(1, int(round(job.prompt + job.response_mean)))
    m = with_seq(job.model, seq)
    hw = of_type(gpus.instance, "rl", gpus.instance.name, max(1, count // gpus.per_node), "bf16", True)
    if count < gpus.per_node:
        from dataclasses import replace

        hw = replace(hw, gpus_per_node=count)
    if shape is None:
        ranked = evaluate(m, hw, job.samples * seq, 1, None, job.framework)
        ties = tie_group(ranked, hw, job.samples * seq)
        return ties.pick if ties is not None else ranked[0]
    tp, cp, pp, ep = shape["tp"], shape.get("cp", 1), shape.get("pp", 1), shape.get("ep", 1)
    dp = count // (tp * cp * pp)
    if dp < 1 or dp * tp * cp * pp != count:
        raise PlanUsageError(f"--rl: {count} training GPUs do not hold tp {tp} x cp {cp} x pp {pp}")
    layout = Layout(tp=tp, pp=pp, dp=dp, ep=ep, micro_batch=1, microbatches=max(1, math.ceil(job.samples / dp)),
                    seq=seq, cp=cp, vp=0)
    return evaluate_layout(m, hw, layout, job.framework, None)


# Passes over the step's tokens, in units of one forward and backward: the actor's update (1), the old policy's and
# the reference's log-probabilities (a forward each, a third of a pass); PPO adds the critic's update and values.
PASSES = {"grpo": 1.0 + 2.0 / 3, "ppo": 1.0 + 2.0 / 3 + 1.0 + 1.0 / 3}


def train_seconds(job: Job, gpus: Gpus, count: Optional[int] = None, shape: Optional[Dict[str, int]] = None) -> float:
    n = count or gpus.count
    candidate = train_layout(job, gpus, n, shape)
    tokens = job.samples * (job.prompt + job.response_mean)
    per_pass = candidate.estimate.seconds * tokens / candidate.step.tokens
    return per_pass * PASSES[job.algorithm] / TRAIN_SHARE


def sync_seconds(job: Job, gpus: Gpus, split: bool) -> float:
    shard = weight_bytes(job.model) / job.rollout_tp
    if not split:
        return shard / gpus.nvlink_bytes_s
    return shard * gpus.per_node / gpus.efa_bytes_s_per_node


def memory_gib(job: Job, gpus: Gpus, train_gpus: int, mode: str) -> Dict[str, Any]:
    """Per GPU: the training states (actor, and critic for PPO: fp32 parameters, gradients and Adam moments) and the
    reference (bf16) sharded over the training GPUs, the rollout engine's weight shard and KV cache (its share of HBM).
    Colocated, the engine's share and the resident states live together during the rollout (veRL frees the KV cache
    for training); split, each side has its GPUs to itself."""
    m = job.model
    hbm = gpus.hbm_bytes / GIB
    states = {"actor_states": TRAIN_BYTES * m.params / train_gpus / GIB,
              "reference": REF_BYTES * m.params / train_gpus / GIB,
              "critic_states": TRAIN_BYTES * m.params / train_gpus / GIB if job.algorithm == "ppo" else 0.0}
    engine = ROLLOUT_MEMORY[mode] * hbm
    shard = weight_bytes(m) / job.rollout_tp / GIB
    resident = sum(states.values())
    usable = hbm * 0.9  # the training planner's allowance for CUDA context, NCCL buffers, fragmentation
    fits = resident + engine <= usable if mode == "colocated" else resident <= usable
    return {**{k: round(v, 1) for k, v in states.items()}, "rollout_weights": round(shard, 1),
            "rollout_kv_cache": round(max(engine - shard, 0.0), 1), "hbm": round(hbm, 1),
            "fits": bool(fits and shard < engine),
            "note": "" if fits else "the training states need offloading to CPU memory (veRL's fsdp_config "
                                    "param_offload / optimizer_offload) or more GPUs"}


@dataclass(frozen=True)
class Step:
    mode: str  # colocated | split
    rollout_gpus: int
    train_gpus: int
    rollout_s: float
    train_s: float
    sync_s: float

    @property
    def step_s(self) -> float:
        if self.mode == "colocated":
            return self.rollout_s + self.train_s + self.sync_s
        return max(self.rollout_s, self.train_s) + self.sync_s

    def summary(self) -> Dict[str, Any]:
        return {"mode": self.mode, "rollout_gpus": self.rollout_gpus, "train_gpus": self.train_gpus,
                "rollout_s": round(self.rollout_s, 2), "train_s": round(self.train_s, 2),
                "sync_s": round(self.sync_s, 3), "step_s": round(self.step_s, 2)}


def colocated(job: Job, gpus: Gpus) -> Step:
    return Step("colocated", gpus.count, gpus.count, rollout_seconds(job, gpus),
                train_seconds(job, gpus, gpus.count, job.train_shape), sync_seconds(job, gpus, split=False))


def shape_of(candidate: Any) -> Dict[str, int]:
    lay = candidate.layout
    return {"tp": lay.tp, "cp": lay.cp, "pp": lay.pp, "ep": lay.ep}


def splits(job: Job, gpus: Gpus) -> List[Step]:
    """Every split in whole nodes (within one node, in whole rollout replicas) whose training side holds the training
    shape (the job's, else the colocated pick's): the slower side plus the sync."""
    shape = job.train_shape or shape_of(train_layout(job, gpus, gpus.count))
    unit = gpus.per_node if gpus.count > gpus.per_node else job.rollout_tp
    out = []
    for r in range(unit, gpus.count, unit):
        train = gpus.count - r
        if r % job.rollout_tp or train % (shape["tp"] * shape["cp"] * shape["pp"]):
            continue
        out.append(Step("split", r, train, rollout_seconds(job, gpus, r, "split"), train_seconds(job, gpus, train, shape),
                        sync_seconds(job, gpus, split=True)))
    return out


def best(job: Job, gpus: Gpus) -> Step:
    options = [colocated(job, gpus), *splits(job, gpus)]
    return min(options, key=lambda s: s.step_s)


def rollout_tps(m: Model, per_node: int, count: int = 0) -> List[int]:
    """The rollout engine's tensor-parallel sizes: a replica splits the attention heads evenly and the KV heads evenly
    or replicates them whole (vLLM's and SGLang's rule for tensor-parallel attention), within one node (dividing its
    GPUs, so replicas tile the nodes) or, given the `count` of GPUs, across whole nodes (dividing the count). The
    model has no term for tensor-parallel traffic between nodes: only a size named explicitly spans nodes."""
    def splits_heads(t: int) -> bool:
        return m.heads % t == 0 and (m.kv_heads % t == 0 or t % m.kv_heads == 0)

    within = [t for t in range(1, per_node + 1) if per_node % t == 0 and splits_heads(t)]
    across = [t for t in range(2 * per_node, count + 1, per_node) if count % t == 0 and splits_heads(t)]
    return within + across


def tp_rule(m: Model, per_node: int, count: int = 0) -> str:
    """What `rollout_tps` allows, said for an error message."""
    allowed = ", ".join(str(t) for t in rollout_tps(m, per_node, count)) or "none"
    where = f"the node's {per_node} GPUs" + (f" (or whole nodes of the {count})" if count > per_node else "")
    return (f"one of {allowed}: dividing {where} and {m.name}'s {m.heads} attention heads, its {m.kv_heads} KV heads "
            "split or replicated evenly")


@lru_cache(maxsize=1)
def data() -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads((DATA / "rl.json").read_text(encoding="utf-8"))
    return loaded


def model(name: str) -> Model:
    """A post-training preset of data/rl.json, else the training planner's."""
    raw = data()["models"].get(name.lower())
    found = build(dict(raw, name=name.lower()), "--model") if raw else preset(name)
    if found is None:
        names = sorted(data()["models"]) + ["the training presets (fmcluster plan --help)"]
        raise PlanUsageError(f"--model: {name!r} is not a preset: {', '.join(names)}")
    return found


def preset_for(hf_id: str) -> Optional[str]:
    """The preset of a Hugging Face model id (Qwen/Qwen2.5-0.5B-Instruct -> qwen2.5-0.5b), where there is one."""
    name = hf_id.rsplit("/", 1)[-1].lower().replace("llama-", "llama")  # meta-llama/Llama-3.1-8B: llama3.1-8b
    for suffix in ("-instruct", "-base"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    if name in data()["models"]:
        return name
    return name if preset(name) is not None else None


def run_job(run: Dict[str, Any]) -> Tuple[Job, Gpus]:
    from fmcluster import catalog

    instance = catalog.get(run["gpu_instance"])
    m = model(run["model"])
    total = run["tokens_per_s_per_gpu"] * run["step_s"] * run["gpus"] / run["samples"]
    job = Job(model=m, samples=run["samples"], prompt=max(total - run["response_mean"], 1.0),
              response_mean=run["response_mean"], response_max=run["response_max"], rollout_tp=run["rollout_tp"],
              framework=run["framework"], train_shape=run["train_layout"])
    return job, Gpus.of(instance, run["gpus"])


def predicted(run: Dict[str, Any]) -> float:
    job, gpus = run_job(run)
    if run.get("mode") == "split":
        options = splits(job, gpus)
        return min(s.step_s for s in options) if options else colocated(job, gpus).step_s
    return colocated(job, gpus).step_s


def is_dense(run: Dict[str, Any]) -> bool:
    return not model(run["model"]).is_moe


def calibration_runs() -> List[Dict[str, Any]]:
    """What the constants are fitted on: every dense run, on-policy and one step off (MoE runs are outside the model:
    docs/post-training.md)."""
    return [r for r in data()["runs"] + data()["holdout"] if is_dense(r)]


def calibration() -> List[Dict[str, Any]]:
    rows = []
    for kind in ("runs", "holdout"):
        for run in data()[kind]:
            p = predicted(run)
            rows.append({"id": run["id"], "set": "dense" if is_dense(run) else "moe", "mode": run.get("mode", "colocated"),
                         "measured_s": run["step_s"], "predicted_s": round(p, 1), "error": round(p / run["step_s"] - 1, 3),
                         "source": run["source"]["url"]})
    return rows

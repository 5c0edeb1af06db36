"""veRL GRPO for `fmcluster job rl`: the pinned release and image, the first job's model and data, and the trainer's
command line, every key held to the pinned release's own configuration (verl_keys.KEYS, from its generated trainer
config; scripts/verl_keys.py refreshes it). docs/post-training.md has the sources and the reasons.

Pins. veRL 0.6.0 with its application image for the 0.6 releases, whose tag names every framework version in it
(veRL's install docs: "image with tag verl0.4 is built for verl release v0.4.x"; 0.6.0's setup.py pins
sglang[srt,openai]==0.5.2 and torch==2.8.0, as the tag does). The image holds veRL's dependencies, not veRL ("you
only need to install verl itself without dependencies", docker/README.md), so every Ray node installs the pinned
wheel with --no-deps at start. verl's own EFA layer for AWS (docker/aws/Dockerfile.extention.awsefa at the tag)
builds on this same image: a copy of that build in the cluster's region, passed as --image, is the image for
multi-node runs (the base image has no libfabric, so NCCL between nodes would use TCP).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence

from fmcluster.posttraining import verl_keys

VERSION = "0.6.0"
IMAGE = "verlai/verl:app-verl0.6-transformers4.56.1-sglang0.5.2-mcore0.13.0-te2.2"
IMAGE_SOURCE = "https://github.com/volcengine/verl/blob/v0.6.0/docs/start/install.rst"
ROLLOUT = "sglang"  # the engine the image carries (sglang 0.5.2)
# The first job: veRL's quickstart model on GSM8K (docs/start/quickstart.rst), prepared by veRL's own script at the
# pinned tag, fetched and checked against its sha256 (the wheel ships verl/ only, not examples/).
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
GSM8K_SCRIPT = f"https://raw.githubusercontent.com/volcengine/verl/v{VERSION}/examples/data_preprocess/gsm8k.py"
GSM8K_SHA256 = "b67a4b58eb97a1a8c5f4157072296798668af13d2db0958b921cfff1f4938975"
GSM8K_TRAIN = 7473  # problems in openai/gsm8k's train split (https://huggingface.co/datasets/openai/gsm8k)
# veRL's multinode runtime environment (verl/trainer/runtime_env.yaml)
RUNTIME_ENV = {"TORCH_NCCL_AVOID_RECORD_STREAMS": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


class UnknownKey(ValueError):
    pass


@dataclass(frozen=True)
class GrpoRun:
    """One GRPO run as fmcluster sizes it: where things are, how big a step is, how the rollout is split."""

    name: str
    model: str  # a Hugging Face id, downloaded once to model_dir
    model_dir: str
    data_dir: str
    checkpoint_dir: str
    nodes: int
    gpus_per_node: int
    prompts: int = 256  # data.train_batch_size: prompts per step
    group: int = 8  # rollout.n: responses per prompt
    prompt_length: int = 512
    response_length: int = 1024
    rollout_tp: int = 1
    save_freq: int = 20
    keep: int = 3
    gpu_memory_utilization: float = 0.6  # veRL's perf guide: 0.5-0.7

    @property
    def steps_per_epoch(self) -> int:
        return -(-GSM8K_TRAIN // self.prompts)


def overrides(run: GrpoRun) -> Dict[str, str]:
    """The trainer's Hydra overrides (key -> value), after veRL's GRPO example (examples/grpo_trainer/run_qwen2-7b.sh)
    and its performance guide (fsdp2, dynamic batch sizes with 2 x (prompt + response) tokens per GPU)."""
    tokens = 2 * (run.prompt_length + run.response_length)
    mini = max(1, run.prompts // 4)
    return {
        "algorithm.adv_estimator": "grpo",
        "algorithm.use_kl_in_reward": "False",
        "data.train_files": f"{run.data_dir}/train.parquet",
        "data.val_files": f"{run.data_dir}/test.parquet",
        "data.train_batch_size": str(run.prompts),
        "data.max_prompt_length": str(run.prompt_length),
        "data.max_response_length": str(run.response_length),
        "data.filter_overlong_prompts": "True",
        "data.truncation": "error",
        "actor_rollout_ref.model.path": run.model_dir,
        "actor_rollout_ref.model.use_remove_padding": "True",
        "actor_rollout_ref.model.enable_gradient_checkpointing": "True",
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "actor_rollout_ref.actor.optim.lr": "1e-6",
        "actor_rollout_ref.actor.ppo_mini_batch_size": str(mini),
        "actor_rollout_ref.actor.use_dynamic_bsz": "True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": str(tokens),
        "actor_rollout_ref.actor.use_kl_loss": "True",
        "actor_rollout_ref.actor.kl_loss_coef": "0.001",
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
        "actor_rollout_ref.actor.entropy_coeff": "0",
        "actor_rollout_ref.actor.fsdp_config.param_offload": "False",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "False",
        "actor_rollout_ref.rollout.name": ROLLOUT,
        "actor_rollout_ref.rollout.n": str(run.group),
        "actor_rollout_ref.rollout.tensor_model_parallel_size": str(run.rollout_tp),
        "actor_rollout_ref.rollout.gpu_memory_utilization": str(run.gpu_memory_utilization),
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": "True",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": str(tokens),
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": "True",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": str(tokens),
        "actor_rollout_ref.ref.fsdp_config.param_offload": "True",
        "trainer.critic_warmup": "0",
        "trainer.logger": "[console]",
        "trainer.project_name": "fmcluster",
        "trainer.experiment_name": run.name,
        "trainer.n_gpus_per_node": str(run.gpus_per_node),
        "trainer.nnodes": str(run.nodes),
        "trainer.save_freq": str(run.save_freq),
        "trainer.test_freq": "10",
        "trainer.total_epochs": "15",
        "trainer.val_before_train": "False",
        # resume on restart: from the newest checkpoint under default_local_dir, on the shared file system
        "trainer.default_local_dir": run.checkpoint_dir,
        "trainer.resume_mode": "auto",
        "trainer.max_actor_ckpt_to_keep": str(run.keep),
    }


def check_keys(keys: Sequence[str]) -> None:
    """Refuse a key the pinned veRL does not have (Hydra would stop the job at start, after the queue wait)."""
    unknown = sorted(k.lstrip("+") for k in keys if k.lstrip("+") not in verl_keys.KEYS)
    if unknown:
        raise UnknownKey(f"not a configuration key of veRL {verl_keys.TAG}: {', '.join(unknown)}")


def command(values: Mapping[str, str]) -> List[str]:
    check_keys(list(values))
    return ["python3", "-m", "verl.trainer.main_ppo", *(f"{k}={v}" for k, v in values.items())]


def prepare_lines(run: GrpoRun) -> List[str]:
    """Shell lines, each whole, that put the model and GSM8K on the shared file system once (later runs find them)."""
    model, data = shlex.quote(run.model_dir), shlex.quote(run.data_dir)
    download = ("python3 -c 'import sys; from huggingface_hub import snapshot_download; "
                "snapshot_download(sys.argv[1], local_dir=sys.argv[2])'")
    return [
        f"[ -f {model}/config.json ] || {download} {shlex.quote(run.model)} {model}",
        f"[ -f {data}/train.parquet ] || {{ mkdir -p {data} && curl -fsSL --max-time 120 -o {data}/gsm8k.py "
        f"{GSM8K_SCRIPT} && echo '{GSM8K_SHA256}  {run.data_dir}/gsm8k.py' | sha256sum -c - && "
        f"python3 {data}/gsm8k.py --local_save_dir {data}; }}",
    ]


def install_line() -> str:
    """What every Ray node runs before `ray start`: the pinned veRL, without touching the image's dependencies."""
    return f"pip install --no-deps --quiet verl=={VERSION}"


def train_line(run: GrpoRun) -> str:
    return " ".join(shlex.quote(a) for a in command(overrides(run)))


def entrypoint(run: GrpoRun) -> str:
    """The job's driver as one command (a RayJob's entrypoint, which Ray runs with /bin/sh): prepare, then train."""
    return "bash -c " + shlex.quote("; ".join(["set -euo pipefail", *prepare_lines(run), train_line(run)]))

"""Supervised fine-tuning with Hugging Face TRL for `fmcluster job sft`: the pinned release and image, the config
`trl sft --config` reads (every key held to TRL's own fields at the tag, trl_keys.KEYS, or transformers'
TrainingArguments), and the launch line for one node of N (accelerate's multi-node arguments, which `trl` passes
through: TRL docs/source/clis.md). Why TRL and not torchtune or NeMo: docs/post-training.md.

Image: the base of TRL's own Dockerfile (docker/trl/Dockerfile at the tag: pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel,
then TRL installed into it); the job installs the pinned TRL at start, as that Dockerfile does at build time.
"""

from __future__ import annotations

from typing import Any, Dict, List

import yaml

from fmcluster.posttraining import trl_keys

VERSION = "1.9.0"
IMAGE = "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel"
IMAGE_SOURCE = "https://github.com/huggingface/trl/blob/v1.9.0/docker/trl/Dockerfile"
MODEL = "Qwen/Qwen2.5-0.5B"  # TRL's CLI examples (docs/source/clis.md)
DATASET = "trl-lib/Capybara"  # TRL's SFT quickstart data set (conversational)
PORT = 29500
# transformers' TrainingArguments (SFTConfig's base class) fields the config sets:
# https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments
TRAINING_ARGUMENTS = frozenset({"output_dir", "num_train_epochs", "per_device_train_batch_size",
                                "gradient_accumulation_steps", "gradient_checkpointing", "bf16", "save_strategy",
                                "save_steps", "save_total_limit", "logging_steps", "report_to"})


class UnknownKey(ValueError):
    pass


def config(*, model: str, dataset: str, output_dir: str, save_steps: int, keep: int) -> Dict[str, Any]:
    values: Dict[str, Any] = {
        "model_name_or_path": model, "dataset_name": dataset, "output_dir": output_dir,
        "max_length": 2048, "packing": True, "learning_rate": 2.0e-5, "num_train_epochs": 1,
        "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "gradient_checkpointing": True,
        "bf16": True, "save_strategy": "steps", "save_steps": save_steps, "save_total_limit": keep,
        "logging_steps": 10, "report_to": "none", "accelerate_config": "fsdp2",
    }
    check_keys(values)
    return values


def check_keys(values: Dict[str, Any]) -> None:
    unknown = sorted(k for k in values if k not in trl_keys.KEYS | TRAINING_ARGUMENTS | {"accelerate_config"})
    if unknown:
        raise UnknownKey(f"not a `trl sft` key of TRL {trl_keys.TAG}: {', '.join(unknown)}")


def config_yaml(values: Dict[str, Any]) -> str:
    return yaml.safe_dump(values, sort_keys=False)


def install_line() -> str:
    return f"pip install --quiet trl=={VERSION}"


def launch(*, config_path: str, nodes: int, gpus_per_node: int, rank: str, head: str) -> List[str]:
    """`trl sft` on one node: accelerate's machine rank, head address and total process count. No resume: TRL's
    sft script calls trainer.train() without a checkpoint (trl/scripts/sft.py at the tag); checkpoints are kept."""
    return ["trl", "sft", "--config", config_path, "--num_machines", str(nodes), "--machine_rank", rank,
            "--main_process_ip", head, "--main_process_port", str(PORT),
            "--num_processes", str(nodes * gpus_per_node)]

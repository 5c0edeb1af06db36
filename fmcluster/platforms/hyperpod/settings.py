"""What every SageMaker HyperPod kind checks of its instance groups: the instance types HyperPod offers and its
instance group names."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import FrozenSet, Optional

from pydantic import AfterValidator, Field
from typing_extensions import Annotated

from fmcluster.runtime.contract import ml_type

# The SageMaker API model's ClusterInstanceType enum as the pinned botocore ships it, written out by
# scripts/hyperpod_instance_types.py: reading it from botocore took 0.4 s of every validate and plan of a HyperPod spec
# (botocore's import and a 4 MB model); a test holds the file equal to the pinned botocore's enum.
INSTANCE_TYPES = Path(__file__).resolve().parent / "instance_types.json"


@functools.lru_cache(maxsize=1)
def hyperpod_instance_types() -> FrozenSet[str]:
    """The ml. types HyperPod offers (offline; it moves with the pinned botocore)."""
    return frozenset(json.loads(INSTANCE_TYPES.read_text(encoding="utf-8"))["types"])


def offered_problem(instance_type: str) -> Optional[str]:
    """Why HyperPod would refuse `instance_type`, or None."""
    ml = ml_type(instance_type)
    if ml in hyperpod_instance_types():
        return None
    family = ml.split(".")[1] if ml.count(".") >= 2 else ml
    near = sorted(t for t in hyperpod_instance_types() if t.split(".")[1] == family)
    hint = f"; {family} sizes it offers: {', '.join(near)}" if near else ""
    return f"{ml} is not a SageMaker HyperPod instance type{hint}"


def _offered(instance_type: str) -> str:
    problem = offered_problem(instance_type)
    if problem:
        raise ValueError(problem)
    return ml_type(instance_type)


def _threads(threads: int) -> int:
    if threads not in (1, 2):
        raise ValueError(f"ThreadsPerCore is 1 (hyperthreading off) or 2 (on), not {threads}")
    return threads


# Field types every HyperPod kind's settings share: an instance type HyperPod offers (stored ml.-prefixed), and the
# instance groups' ThreadsPerCore (CreateCluster API: 1 or 2).
HyperPodInstanceType = Annotated[str, AfterValidator(_offered)]
ThreadsPerCore = Annotated[int, AfterValidator(_threads),
                           Field(description="1: hyperthreading off (usual for GPU training), 2: on.")]

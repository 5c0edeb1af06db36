"""What every SageMaker HyperPod kind checks of its instance groups: the instance types HyperPod offers and its
instance group names."""

from __future__ import annotations

import functools
from typing import FrozenSet, Optional

from pydantic import AfterValidator, Field
from typing_extensions import Annotated

from fmcluster.runtime.contract import ml_type


@functools.lru_cache(maxsize=1)
def hyperpod_instance_types() -> FrozenSet[str]:
    """The ml. types HyperPod offers: the SageMaker API model's ClusterInstanceType enum, as shipped
    in botocore (offline; it moves with the pinned botocore)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.shape_for("ClusterInstanceType").enum)


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

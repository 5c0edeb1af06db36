"""The ``orchestrator`` section's base model: every kind's settings subclass it (`OrchestratorSettings`), and what a
kind says it runs beside the node groups (`ExtraInstance`). What the spec knows of a kind is
`fmcluster.spec.cluster.OrchestratorTraits`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Type, TypeVar

from fmcluster.spec.base import SpecModel

S = TypeVar("S", bound="OrchestratorSettings")


class OrchestratorSettings(SpecModel):
    """The spec's ``orchestrator`` section. Each kind subclasses it with ``type: Literal["<kind>"]``."""

    type: str

    @classmethod
    def of(cls: Type[S], spec: Any) -> S:
        """A spec's ``orchestrator`` section, typed as this kind's settings (TypeError for another kind's): the one
        accessor every kind's modules use (`OrchestratorKind.settings_of` is the same for its declaration)."""
        return orchestrator_settings(spec.orchestrator, cls)


def orchestrator_settings(orchestrator: OrchestratorSettings, model: Type[S]) -> S:
    """A spec's ``orchestrator`` section as `model`, the settings of the kind asking (TypeError for another kind's)."""
    if not isinstance(orchestrator, model):
        raise TypeError(f"the spec's orchestrator is {orchestrator.type}, not {model.__name__}")
    return orchestrator


@dataclass(frozen=True)
class BilledService:
    """A service the orchestrator runs that bills by the hour beside the instances (EKS control plane, PCS controller):
    the key of its price in the planner's price data, and what the plan line says about it."""

    key: str
    detail: str
    count: int = 1


@dataclass(frozen=True)
class SpecWarning:
    """What a valid spec does that costs or risks more than its author may expect: `fmcluster validate` prints it and
    still exits 0. ``costs_more``: (the billed service's key, the key of the one it is billed instead of), for
    validate to add the monthly difference from the planner's price data."""

    path: str
    message: str
    costs_more: Optional[Tuple[str, str]] = None


@dataclass(frozen=True)
class ExtraInstance:
    """An instance the orchestrator runs beside the node groups (login node, controller)."""

    role: str
    instance_type: str  # as the service names it (``ml.`` prefixed for SageMaker HyperPod)
    count: int = 1


# The Deep Learning AMI keeps nccl-tests (built with MPI) per CUDA version, beside the NCCL it links in <cuda>/lib: the
# directories AWS's own DLAMI job uses (aws-samples/awsome-distributed-training, micro-benchmarks/nccl-tests/slurm/
# nccl-tests-ami.sbatch: /usr/local/cuda-<v>/efa/test-cuda-<v>/all_reduce_perf with <cuda>/lib on the library path).
DLAMI_NCCL_TESTS = "/usr/local/cuda-*/efa/test-cuda-*"
DLAMI_SOURCE = "https://github.com/aws-samples/awsome-distributed-training/tree/main/micro-benchmarks/nccl-tests/slurm"


@dataclass(frozen=True)
class JobImage:
    """What a kind's nodes, as fmcluster deploys them, hold for the first job (`fmcluster job nccl`).

    :param name: the image, in words (the job's header names it).
    :param nccl_tests: a shell glob of the image's nccl-tests builds (made with MPI=1; the newest in version order is
        taken); "" where the image has none: the job's preparation then builds NCCL and nccl-tests once, from pinned
        and checksummed sources, on storage every node mounts.
    :param shared_home: users' home directories are on storage every node mounts (a place for that build when the
        spec has no shared file system).
    :param container: the job runs in a container image that brings nccl-tests (the Kubernetes kinds' MPIJob), not
        on the node's own image.
    :param source: the public page that says what the image holds.
    """

    name: str
    nccl_tests: str
    source: str
    shared_home: bool = False
    container: bool = False


DLAMI = JobImage(name="the Deep Learning Base OSS NVIDIA Driver GPU AMI (Ubuntu 22.04)", nccl_tests=DLAMI_NCCL_TESTS,
                 source=DLAMI_SOURCE)


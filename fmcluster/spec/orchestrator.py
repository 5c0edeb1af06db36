"""The ``orchestrator`` section's base model: every kind's settings subclass it (`OrchestratorSettings`), and what a
kind says it runs beside the node groups (`ExtraInstance`). What the spec knows of a kind is
`fmcluster.spec.cluster.OrchestratorTraits`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Type, TypeVar

from fmcluster.spec.base import SpecModel


class OrchestratorSettings(SpecModel):
    """The spec's ``orchestrator`` section. Each kind subclasses it with ``type: Literal["<kind>"]``."""

    type: str


S = TypeVar("S", bound=OrchestratorSettings)


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

"""`orchestrator: {type: none}`: nothing beyond the type."""

from __future__ import annotations

from typing import Literal

from fmcluster.spec.orchestrator import OrchestratorSettings


class NoOrchestrator(OrchestratorSettings):
    """Network, placement groups, EFA launch templates and a node role; bring your own scheduler."""

    type: Literal["none"] = "none"

"""The node contract's rules every kind shares: each orchestrator's agent has its unit on the node."""

from __future__ import annotations

import pytest

from fmcluster import registry
from fmcluster.runtime import contract


def test_every_orchestrator_agent_has_a_unit_on_the_node():
    for kind in registry.kinds():
        assert kind.nodes.agent is None or contract.agent_unit(kind.nodes.agent) in ("slurmd", "kubelet")
    with pytest.raises(ValueError):
        contract.agent_unit("nomad")

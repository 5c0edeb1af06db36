"""A consequence a reviewer acts on, in one of five classes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

DATA, NODES, CONTROL_PLANE, CAPACITY, SAFE = "data", "nodes", "control-plane", "capacity", "safe"
CLASSES = (DATA, NODES, CONTROL_PLANE, CAPACITY, SAFE)
TITLES = {
    DATA: "Data: stateful resources replaced or deleted",
    NODES: "Nodes: instances replaced, rebooted or terminated",
    CONTROL_PLANE: "Control plane and shared network",
    CAPACITY: "Capacity: reservations, Capacity Blocks, training plans no longer matched; served models below min",
    SAFE: "Safe",
}


@dataclass
class Finding:
    cls: str
    where: str  # stack/logical id (and group)
    text: str
    gpus: int = 0  # GPUs on the instances this finding replaces, reboots or terminates
    jobs: str = ""  # what happens to running jobs, per the orchestrator's documented behaviour
    sources: List[str] = field(default_factory=list)
    # CloudFormation or the service refuses this part of the update: the deploy fails (and rolls back) until the
    # way through the text names is taken. Never "safe", whatever the class.
    fails: bool = False

    def as_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"class": self.cls, "where": self.where, "text": self.text}
        if self.cls == NODES:
            d["gpus"] = self.gpus
            d["running_jobs"] = self.jobs
        if self.sources:
            d["sources"] = self.sources
        if self.fails:
            d["deploy_fails"] = True
        return d

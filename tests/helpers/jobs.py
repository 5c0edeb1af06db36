"""The example Kubernetes jobs under examples/jobs/, as the kinds' job tests read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import yaml

JOBS = Path(__file__).resolve().parents[2] / "examples" / "jobs"


def objects(name: str) -> Dict[str, Any]:
    """kind -> object of the multi-document manifest `name`."""
    return {o["kind"]: o for o in yaml.safe_load_all((JOBS / name).read_text())}


def pods(job: Dict[str, Any]) -> Iterator[Tuple[str, int, Dict[str, Any]]]:
    """(role, replicas, pod spec with the replica's restart policy) of each MPIJob replica."""
    for role, replica in job["spec"]["mpiReplicaSpecs"].items():
        yield role, replica["replicas"], {**replica["template"]["spec"], "restartPolicy": replica["restartPolicy"]}

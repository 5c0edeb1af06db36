"""validation.policy replace is SageMaker HyperPod's: the spec takes it where HyperPod replaces nodes on request and
refuses it elsewhere, saying what does the replacing there."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError

ORCHESTRATORS: Dict[str, Dict[str, Any]] = {
    "none": {"type": "none"},
    "pcs": {"type": "pcs"},
    "parallelcluster": {"type": "parallelcluster"},
    "eks": {"type": "eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"]}},
    "hyperpod-slurm": {"type": "hyperpod-slurm"},
    "hyperpod-eks": {"type": "hyperpod-eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"],
                                                    "control_plane_availability_zone": "us-east-1b"},
                     "task_governance": {"teams": [{"name": "research", "gpus": {"gpu": 8}}]}},
}


def spec(orchestrator: str) -> Dict[str, Any]:
    group = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
             "ami_id": "ami-0123456789abcdef0", "image_family": "dlami-ubuntu-22.04"}
    if orchestrator.startswith("hyperpod") or orchestrator in ("eks", "parallelcluster"):
        group = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}
    return {"name": "fm-replace", "region": "us-east-1", "availability_zone": "us-east-1a",
            "orchestrator": ORCHESTRATORS[orchestrator], "node_groups": [group],
            "validation": {"policy": "replace"}}


@pytest.mark.parametrize("orchestrator", ["hyperpod-slurm", "hyperpod-eks"])
def test_hyperpod_takes_replace(orchestrator):
    assert parse_spec(spec(orchestrator)).validation_policy == "replace"


@pytest.mark.parametrize("orchestrator, words", [
    ("none", "no scheduler runs here to drain, taint or replace"),
    ("pcs", "PCS documents no Slurm reason or state that replaces an instance"),
    ("parallelcluster", "fail is ParallelCluster's replacement"),
    ("eks", "EKS node auto-repair acts on the node monitoring agent's conditions"),
])
def test_other_kinds_refuse_replace_and_say_what_replaces_there(orchestrator, words):
    with pytest.raises(SpecError) as e:
        parse_spec(spec(orchestrator))
    lines = [ln for ln in e.value.problems if ln.startswith("validation.policy: replace does not apply")]
    assert lines and words in lines[0], e.value.problems

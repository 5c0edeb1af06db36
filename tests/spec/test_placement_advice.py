"""Several on-demand GPU instances that must start together in one cluster placement group when the cluster is created:
on the kinds whose creation waits for them (EKS managed node groups, ParallelCluster's static nodes) validate says what
happens when they are not all there and what AWS recommends (capacity reserved in the placement group)."""

from __future__ import annotations

from helpers import ROOT

from fmcluster.registry import load_spec

EXAMPLES = ROOT / "examples"


def warnings(example: str):
    spec = load_spec(EXAMPLES / example)
    return [w for w in spec.orchestrator_kind.spec_warnings(spec) if w.path.endswith(".capacity.type")]


def test_eks_says_the_auto_scaling_group_retries_and_what_aws_recommends():
    (w,) = warnings("eks-p5.yaml")
    assert w.path == "node_groups[0].capacity.type" and "4 on-demand p5.48xlarge" in w.message
    assert "AsgInstanceLaunchFailures" in w.message and "unverified" in w.message
    assert "On-Demand Capacity Reservation made in it" in w.message and "existing_group" in w.message


def test_parallelcluster_says_creation_rolls_back():
    (w,) = warnings("parallelcluster-p5.yaml")  # the static GPU queue; the elastic CPU queue starts nothing
    assert "rolls the whole creation back" in w.message and "Capacity Block" in w.message


def test_reserved_capacity_and_kinds_that_do_not_wait_are_left_alone():
    for example in ("eks-p6-b200-capacity-block.yaml", "parallelcluster-p5en-capacity-block.yaml",
                    "pcs-p6-b200-odcr.yaml", "default.yaml", "pcs-p5.yaml"):
        assert warnings(example) == [], example

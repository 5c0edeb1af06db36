"""What a valid spec risks when several on-demand GPU instances must start together in one cluster placement group at
creation, and what AWS recommends instead. A kind whose creation waits for those instances (EKS managed node groups,
ParallelCluster's static nodes) warns with what happens on it when they are not all there (`validate` prints it).

AWS, "Placement group rules and limitations": "If you plan to launch instances into a cluster placement group, we
recommend that you reserve capacity explicitly in the cluster placement group. You can do this by creating an
On-Demand Capacity Reservation in a specified cluster placement group."
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List

from fmcluster.spec.orchestrator import SpecWarning

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

PLACEMENT_RULES = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/limitations-placement-groups.html"
RECOMMENDED = ("AWS recommends reserving the capacity in the cluster placement group: an On-Demand Capacity Reservation "
               f"made in it ({PLACEMENT_RULES}), here capacity: {{type: odcr, reservation_id: cr-...}} with placement: "
               "{existing_group: <the reservation's placement group>}, or a Capacity Block")


def on_demand_together(spec: ClusterSpec, at_creation: Dict[str, int], what_happens: str) -> List[SpecWarning]:
    """A warning per on-demand GPU group whose `at_creation` instances (group name -> count the creation waits for)
    launch together into a cluster placement group fmcluster creates; `what_happens`: on this kind, when EC2 cannot
    place them all."""
    found: List[SpecWarning] = []
    for i, g in enumerate(spec.node_groups):
        n = at_creation.get(g.name, 0)
        if g.capacity.type != "on-demand" or g.placement_strategy != "cluster" or not g.instance.is_gpu or n < 2:
            continue
        found.append(SpecWarning(
            f"node_groups[{i}].capacity.type",
            f"{n} on-demand {g.instance_type} start together in one cluster placement group when the cluster is "
            f"created, and On-Demand capacity for all of them at once in one placement group is not assured: "
            f"{what_happens}. {RECOMMENDED}"))
    return found

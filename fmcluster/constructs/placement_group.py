"""Placement groups: UltraCluster (cluster) or partition placement in the nodes' AZ."""

from __future__ import annotations

from typing import Optional

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

STRATEGIES = ("cluster", "partition")


class UltraClusterPlacementGroup(Construct):
    """A placement group in the nodes' AZ: ``cluster`` packs instances onto the
    low-latency UltraCluster fabric; ``partition`` spreads very large fleets over racks.
    Never used with Capacity Blocks (AWS places those itself)."""

    def __init__(self, scope: Construct, id: str, *, strategy: str = "cluster", partitions: Optional[int] = None) -> None:
        super().__init__(scope, id)
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}")
        if partitions is not None and strategy != "partition":
            raise ValueError("partitions: applies to the partition strategy only")
        self.resource = ec2.CfnPlacementGroup(
            self, "Resource", strategy=strategy, partition_count=partitions if strategy == "partition" else None
        )

    @property
    def group_name(self) -> str:
        return self.resource.ref

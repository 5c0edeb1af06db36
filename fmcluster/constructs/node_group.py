"""One EC2 node group: its placement group and its EFA launch template, ready for whatever launches the
instances (an Auto Scaling group of yours, AWS PCS, an EKS managed node group)."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from aws_cdk import Stack
from constructs import Construct

from fmcluster.constructs.launch_template import LaunchTemplateProps, NodeLaunchTemplate
from fmcluster.constructs.logical_ids import logical_id
from fmcluster.constructs.placement_group import UltraClusterPlacementGroup


class Ec2NodeGroup(Construct):
    """Placement group (unless ``placement_strategy`` is ``none``) and launch template for one node group.

    The resources keep the logical ids ``<id>Placement…`` and ``<id>LaunchTemplate…`` they had when they sat
    directly in the cluster stack, so deployed clusters update in place.

    :param template: the launch template's props; its ``placement_group_name`` is this group's (leave it None).
    :param placement_strategy: ``cluster`` | ``partition`` | ``none``.
    :param partitions: partition count (partition strategy only).
    :param existing_placement_group: launch into this placement group (strategy ``none``: nothing is created).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        template: LaunchTemplateProps,
        placement_strategy: str = "cluster",
        partitions: Optional[int] = None,
        existing_placement_group: Optional[str] = None,
    ) -> None:
        super().__init__(scope, id)
        if placement_strategy not in ("cluster", "partition", "none"):
            raise ValueError(f"placement_strategy: {placement_strategy!r} is not cluster, partition or none")
        if existing_placement_group and placement_strategy != "none":
            raise ValueError("existing_placement_group: give it with placement_strategy none (nothing to create)")
        if template.placement_group_name is not None:
            raise ValueError("template.placement_group_name: the node group sets it (placement_strategy, "
                             "existing_placement_group)")
        prefix = [c.node.id for c in self.node.scopes[1:] if not isinstance(c, Stack)][:-1]
        self.placement: Optional[UltraClusterPlacementGroup] = None
        if placement_strategy != "none":
            self.placement = UltraClusterPlacementGroup(self, "Placement", strategy=placement_strategy,
                                                        partitions=partitions)
            self.placement.resource.override_logical_id(logical_id(*prefix, f"{id}Placement", "Resource"))
        group_name = self.placement.group_name if self.placement else existing_placement_group
        self.launch_template = NodeLaunchTemplate(
            self, "LaunchTemplate", props=replace(template, placement_group_name=group_name))
        self.launch_template.resource.override_logical_id(logical_id(*prefix, f"{id}LaunchTemplate", "Resource"))

    @property
    def launch_template_id(self) -> str:
        return self.launch_template.launch_template_id

    @property
    def placement_group_name(self) -> Optional[str]:
        """The group fmcluster created (None when it created none, also when launching into an existing one)."""
        return self.placement.group_name if self.placement else None

"""One EC2 node group: its placement group and its EFA launch template, ready for whatever launches the
instances (an Auto Scaling group of yours, AWS PCS, an EKS managed node group)."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from aws_cdk import Stack
from constructs import Construct

from fmcluster.catalog import InstanceType
from fmcluster.constructs.launch_template import IMDS_HOP_LIMIT, NodeLaunchTemplate
from fmcluster.constructs.logical_ids import logical_id
from fmcluster.constructs.placement_group import UltraClusterPlacementGroup


class Ec2NodeGroup(Construct):
    """Placement group (unless ``placement_strategy`` is ``none``) and launch template for one node group.

    The resources keep the logical ids ``<id>Placement…`` and ``<id>LaunchTemplate…`` they had when they sat
    directly in the cluster stack, so deployed clusters update in place.

    :param instance: catalog entry of the instance type (drives the EFA layout).
    :param efa: attach EFA interfaces.
    :param placement_strategy: ``cluster`` | ``partition`` | ``none``.
    :param partitions: partition count (partition strategy only).
    :param existing_placement_group: launch into this placement group (strategy ``none``: nothing is created).
    :param capacity_type: ``on-demand`` | ``odcr`` | ``capacity-block``; ``reservation_id`` for the latter two.
    :param image_id, user_data, security_group_ids, subnet_id, instance_type, instance_profile_arn,
        root_volume_gib, root_device_name, tags, imds_hop_limit: passed to `NodeLaunchTemplate`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        instance: InstanceType,
        efa: bool,
        image_id: Optional[str],
        root_device_name: str,
        user_data: str,
        security_group_ids: Sequence[str],
        subnet_id: Optional[str],
        placement_strategy: str = "cluster",
        partitions: Optional[int] = None,
        existing_placement_group: Optional[str] = None,
        capacity_type: str = "on-demand",
        reservation_id: Optional[str] = None,
        instance_type: Optional[str] = None,
        instance_profile_arn: Optional[str] = None,
        root_volume_gib: int = 200,
        tags: Optional[Dict[str, str]] = None,
        imds_hop_limit: int = IMDS_HOP_LIMIT,
    ) -> None:
        super().__init__(scope, id)
        if placement_strategy not in ("cluster", "partition", "none"):
            raise ValueError(f"placement_strategy: {placement_strategy!r} is not cluster, partition or none")
        if existing_placement_group and placement_strategy != "none":
            raise ValueError("existing_placement_group: give it with placement_strategy none (nothing to create)")
        prefix = [c.node.id for c in self.node.scopes[1:] if not isinstance(c, Stack)][:-1]
        self.placement: Optional[UltraClusterPlacementGroup] = None
        if placement_strategy != "none":
            self.placement = UltraClusterPlacementGroup(self, "Placement", strategy=placement_strategy,
                                                        partitions=partitions)
            self.placement.resource.override_logical_id(logical_id(*prefix, f"{id}Placement", "Resource"))
        self.launch_template = NodeLaunchTemplate(
            self,
            "LaunchTemplate",
            instance=instance,
            efa=efa,
            security_group_ids=security_group_ids,
            subnet_id=subnet_id,
            image_id=image_id,
            root_device_name=root_device_name,
            user_data=user_data,
            placement_group_name=self.placement.group_name if self.placement else existing_placement_group,
            capacity_type=capacity_type,
            reservation_id=reservation_id,
            instance_type=instance_type,
            instance_profile_arn=instance_profile_arn,
            root_volume_gib=root_volume_gib,
            tags=tags,
            imds_hop_limit=imds_hop_limit,
        )
        self.launch_template.resource.override_logical_id(logical_id(*prefix, f"{id}LaunchTemplate", "Resource"))

    @property
    def launch_template_id(self) -> str:
        return self.launch_template.launch_template_id

    @property
    def placement_group_name(self) -> Optional[str]:
        """The group fmcluster created (None when it created none, also when launching into an existing one)."""
        return self.placement.group_name if self.placement else None

"""AWS Parallel Computing Service (managed Slurm) over its L1 resources: a cluster, one
compute node group per node group (launched from our EFA launch template) and a queue
(Slurm partition) per group."""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence

from aws_cdk import aws_pcs as pcs
from constructs import Construct

from fmcluster.constructs.launch_template import NodeLaunchTemplate

PURCHASE_OPTIONS = {"on-demand": "ONDEMAND", "odcr": "ONDEMAND", "capacity-block": "CAPACITY_BLOCK"}
SIZES = ("SMALL", "MEDIUM", "LARGE")


class PcsCluster(Construct):
    """A PCS cluster in the node subnet, controller reachable through `security_group_ids`
    (the EFA group: all traffic within the group, so nodes and controller talk freely).

    :param size: SMALL | MEDIUM | LARGE (instances the controller manages: 32 / 512 / 2048).
    :param slurm_settings: cluster-level slurm.conf parameters PCS accepts as custom settings (Prolog, Epilog,
        SelectTypeParameters, ...; PCS user guide, "Custom Slurm settings for AWS PCS clusters").
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        subnet_ids: Sequence[str],
        security_group_ids: Sequence[str],
        slurm_version: str,
        size: str,
        scale_down_idle_seconds: int = 600,
        slurm_settings: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(scope, id)
        if size not in SIZES:
            raise ValueError(f"size: {size!r} is not one of {', '.join(SIZES)}")
        self.cluster = pcs.CfnCluster(
            self,
            "Resource",
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=slurm_version),
            size=size,
            networking=pcs.CfnCluster.NetworkingProperty(
                subnet_ids=list(subnet_ids), security_group_ids=list(security_group_ids)
            ),
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=scale_down_idle_seconds,
                slurm_custom_settings=[
                    pcs.CfnCluster.SlurmCustomSettingProperty(parameter_name=k, parameter_value=v)
                    for k, v in (slurm_settings or {}).items()
                ] or None,
            ),
        )
        self.node_groups: List[pcs.CfnComputeNodeGroup] = []
        self.queues: List[pcs.CfnQueue] = []

    @property
    def cluster_id(self) -> str:
        return self.cluster.attr_id

    @property
    def cluster_arn(self) -> str:
        return self.cluster.attr_arn

    def add_node_group(
        self,
        id: str,
        *,
        name: str,
        instance_type: str,
        min_count: int,
        max_count: int,
        launch_template: NodeLaunchTemplate,
        instance_profile_arn: str,
        subnet_ids: Sequence[str],
        ami_id: str,
        capacity_type: str = "on-demand",
        queue: bool = True,
    ) -> pcs.CfnComputeNodeGroup:
        """A compute node group of `instance_type`, and a queue of the same name unless
        `queue` is False (login nodes)."""
        if capacity_type not in PURCHASE_OPTIONS:
            raise ValueError(f"capacity_type: {capacity_type!r} is not one of {', '.join(PURCHASE_OPTIONS)}")
        group = pcs.CfnComputeNodeGroup(
            self,
            id,
            cluster_id=self.cluster_id,
            name=name,
            instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=instance_type)],
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=min_count, max_instance_count=max_count
            ),
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=launch_template.launch_template_id, version=launch_template.latest_version
            ),
            iam_instance_profile_arn=instance_profile_arn,
            subnet_ids=list(subnet_ids),
            ami_id=ami_id,
            purchase_option=PURCHASE_OPTIONS[capacity_type],
        )
        self.node_groups.append(group)
        if queue:
            self.queues.append(
                pcs.CfnQueue(
                    self,
                    f"{id}Queue",
                    cluster_id=self.cluster_id,
                    name=name,
                    compute_node_group_configurations=[
                        pcs.CfnQueue.ComputeNodeGroupConfigurationProperty(compute_node_group_id=group.attr_id)
                    ],
                )
            )
        return group


"""A launch template for cluster nodes (GPU workers, and CPU login nodes): the EFA layout of the instance
type, IMDSv2, an encrypted gp3 root volume, placement and capacity targeting."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from aws_cdk import CfnTag, Fn
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from fmcluster.catalog import InstanceType
from fmcluster.constructs.efa_interfaces import network_interfaces

# IMDSv2 only; by default two hops so containers on the node (Slurm pyxis/enroot, docker) reach it. Kubernetes kinds
# whose pods get credentials another way pass 1: only the host and host-network pods reach IMDS then (EKS best
# practices, "Restrict access to the instance profile assigned to the worker node").
IMDS_HOP_LIMIT = 2
CAPACITY_TYPES = ("on-demand", "odcr", "capacity-block")


class NodeLaunchTemplate(Construct):
    """Launch template for one node group (or a login node).

    :param instance: catalog entry; drives the network-card layout.
    :param efa: attach EFA interfaces (``efa-only`` on every EFA card).
    :param security_group_ids: on every interface (the EFA group must be among them).
    :param subnet_id: the node subnet (one AZ); None when the launching service sets it (EKS).
    :param image_id: AMI id or a deploy-time token (SSM parameter); None leaves the AMI to the launching service
        (an EKS managed node group picks it from its AMI type, and merges its own user data only then).
    :param user_data: MIME multi-part text; base64-encoded here.
    :param placement_group_name: cluster/partition placement group, or None.
    :param capacity_type: ``on-demand`` | ``odcr`` | ``capacity-block``.
    :param reservation_id: ODCR or Capacity Block id for those types.
    :param instance_type: set it for plain EC2 use; orchestrators such as PCS set their own.
    :param instance_profile_arn: likewise; PCS passes its own.
    :param root_volume_gib: encrypted gp3 root volume (container images live on instance NVMe).
    :param root_device_name: the AMI's root device (``/dev/sda1`` on Ubuntu DLAMIs, ``/dev/xvda`` on Amazon Linux).
    :param imds_hop_limit: IMDSv2 PUT response hop limit (1-64); 1 keeps IMDS from containers in their own network
        namespace.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        instance: InstanceType,
        efa: bool,
        security_group_ids: Sequence[str],
        subnet_id: Optional[str],
        image_id: Optional[str],
        root_device_name: str,
        user_data: str,
        placement_group_name: Optional[str] = None,
        capacity_type: str = "on-demand",
        reservation_id: Optional[str] = None,
        instance_type: Optional[str] = None,
        instance_profile_arn: Optional[str] = None,
        root_volume_gib: int = 200,
        tags: Optional[Dict[str, str]] = None,
        imds_hop_limit: int = IMDS_HOP_LIMIT,
    ) -> None:
        super().__init__(scope, id)
        if not 1 <= imds_hop_limit <= 64:
            raise ValueError(f"imds_hop_limit: {imds_hop_limit} is not 1-64 (EC2 InstanceMetadataOptions)")
        if capacity_type not in CAPACITY_TYPES:
            raise ValueError(f"capacity_type: {capacity_type!r} is not one of {', '.join(CAPACITY_TYPES)}")
        if capacity_type in ("odcr", "capacity-block") and not reservation_id:
            raise ValueError(f"reservation_id: required with capacity_type {capacity_type}")
        if capacity_type == "capacity-block" and placement_group_name:
            raise ValueError("placement_group_name: a Capacity Block cannot be combined with a placement group")
        target = (
            ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
                capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                    capacity_reservation_id=reservation_id
                )
            )
            if reservation_id
            else None
        )
        tag_list = (
            [
                ec2.CfnLaunchTemplate.TagSpecificationProperty(
                    resource_type=kind, tags=[CfnTag(key=k, value=v) for k, v in sorted(tags.items())]
                )
                for kind in ("instance", "volume", "network-interface")
            ]
            if tags
            else None
        )
        self.resource = ec2.CfnLaunchTemplate(
            self,
            "Resource",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                image_id=image_id,
                instance_type=instance_type,
                iam_instance_profile=(
                    ec2.CfnLaunchTemplate.IamInstanceProfileProperty(arn=instance_profile_arn)
                    if instance_profile_arn
                    else None
                ),
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_tokens="required",
                    http_endpoint="enabled",
                    http_put_response_hop_limit=imds_hop_limit,
                    instance_metadata_tags="disabled",
                ),
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name=root_device_name,
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_type="gp3",
                            volume_size=root_volume_gib,
                            encrypted=True,
                            delete_on_termination=True,
                            iops=3000,
                            throughput=250,
                        ),
                    )
                ],
                network_interfaces=network_interfaces(
                    instance, efa=efa, security_group_ids=security_group_ids, subnet_id=subnet_id
                ),
                placement=(
                    ec2.CfnLaunchTemplate.PlacementProperty(group_name=placement_group_name)
                    if placement_group_name
                    else None
                ),
                capacity_reservation_specification=target,
                instance_market_options=(
                    ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block")
                    if capacity_type == "capacity-block"
                    else None
                ),
                ebs_optimized=True if instance.is_gpu else None,
                user_data=Fn.base64(user_data),
                tag_specifications=tag_list,
            ),
        )

    @property
    def launch_template_id(self) -> str:
        return self.resource.ref

    @property
    def latest_version(self) -> str:
        return self.resource.attr_latest_version_number

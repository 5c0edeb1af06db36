"""A launch template for cluster nodes (GPU workers, and CPU login nodes): the EFA layout of the instance
type, IMDSv2, an encrypted gp3 root volume, placement and capacity targeting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

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


@dataclass(frozen=True)
class LaunchTemplateProps:
    """What a node launch template holds, checked when built (an invalid combination never reaches CDK).

    :param instance: catalog entry; drives the network-card layout.
    :param efa: attach EFA interfaces (``efa-only`` on every EFA card).
    :param security_group_ids: on every interface (the EFA group must be among them).
    :param subnet_id: the node subnet (one AZ); None when the launching service sets it (EKS).
    :param image_id: AMI id or a deploy-time token (SSM parameter); None leaves the AMI to the launching service
        (an EKS managed node group picks it from its AMI type, and merges its own user data only then).
    :param root_device_name: the AMI's root device (``/dev/sda1`` on Ubuntu DLAMIs, ``/dev/xvda`` on Amazon Linux).
    :param user_data: MIME multi-part text; base64-encoded by the template.
    :param placement_group_name: cluster/partition placement group, or None.
    :param capacity_type: ``on-demand`` | ``odcr`` | ``capacity-block``.
    :param reservation_id: ODCR or Capacity Block id for those types.
    :param instance_type: set it for plain EC2 use; orchestrators such as PCS set their own.
    :param instance_profile_arn: likewise; PCS passes its own.
    :param root_volume_gib: encrypted gp3 root volume (container images live on instance NVMe).
    :param tags: on the instance, its volumes and its interfaces.
    :param imds_hop_limit: IMDSv2 PUT response hop limit (1-64); 1 keeps IMDS from containers in their own network
        namespace.
    """

    instance: InstanceType
    efa: bool
    security_group_ids: Sequence[str]
    subnet_id: Optional[str]
    image_id: Optional[str]
    root_device_name: str
    user_data: str
    placement_group_name: Optional[str] = None
    capacity_type: str = "on-demand"
    reservation_id: Optional[str] = None
    instance_type: Optional[str] = None
    instance_profile_arn: Optional[str] = None
    root_volume_gib: int = 200
    tags: Optional[Mapping[str, str]] = None
    imds_hop_limit: int = IMDS_HOP_LIMIT

    def __post_init__(self) -> None:
        if not 1 <= self.imds_hop_limit <= 64:
            raise ValueError(f"imds_hop_limit: {self.imds_hop_limit} is not 1-64 (EC2 InstanceMetadataOptions)")
        if self.capacity_type not in CAPACITY_TYPES:
            raise ValueError(f"capacity_type: {self.capacity_type!r} is not one of {', '.join(CAPACITY_TYPES)}")
        if self.capacity_type in ("odcr", "capacity-block") and not self.reservation_id:
            raise ValueError(f"reservation_id: required with capacity_type {self.capacity_type}")
        if self.capacity_type == "capacity-block" and self.placement_group_name:
            raise ValueError("placement_group_name: a Capacity Block cannot be combined with a placement group")


class NodeLaunchTemplate(Construct):
    """Launch template for one node group (or a login node), from its `LaunchTemplateProps`: IMDSv2 only, an
    encrypted gp3 root volume, the instance type's EFA layout, placement and capacity targeting."""

    def __init__(self, scope: Construct, id: str, *, props: LaunchTemplateProps) -> None:
        super().__init__(scope, id)
        self.props = p = props
        target = (
            ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
                capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                    capacity_reservation_id=p.reservation_id
                )
            )
            if p.reservation_id
            else None
        )
        tag_list = (
            [
                ec2.CfnLaunchTemplate.TagSpecificationProperty(
                    resource_type=kind, tags=[CfnTag(key=k, value=v) for k, v in sorted(p.tags.items())]
                )
                for kind in ("instance", "volume", "network-interface")
            ]
            if p.tags
            else None
        )
        self.resource = ec2.CfnLaunchTemplate(
            self,
            "Resource",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                image_id=p.image_id,
                instance_type=p.instance_type,
                iam_instance_profile=(
                    ec2.CfnLaunchTemplate.IamInstanceProfileProperty(arn=p.instance_profile_arn)
                    if p.instance_profile_arn
                    else None
                ),
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_tokens="required",
                    http_endpoint="enabled",
                    http_put_response_hop_limit=p.imds_hop_limit,
                    instance_metadata_tags="disabled",
                ),
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name=p.root_device_name,
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_type="gp3",
                            volume_size=p.root_volume_gib,
                            encrypted=True,
                            delete_on_termination=True,
                            iops=3000,
                            throughput=250,
                        ),
                    )
                ],
                network_interfaces=network_interfaces(
                    p.instance, efa=p.efa, security_group_ids=p.security_group_ids, subnet_id=p.subnet_id
                ),
                placement=(
                    ec2.CfnLaunchTemplate.PlacementProperty(group_name=p.placement_group_name)
                    if p.placement_group_name
                    else None
                ),
                capacity_reservation_specification=target,
                instance_market_options=(
                    ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block")
                    if p.capacity_type == "capacity-block"
                    else None
                ),
                ebs_optimized=True if p.instance.is_gpu else None,
                user_data=Fn.base64(p.user_data),
                tag_specifications=tag_list,
            ),
        )

    @property
    def launch_template_id(self) -> str:
        return self.resource.ref

    @property
    def latest_version(self) -> str:
        return self.resource.attr_latest_version_number

"""EC2 node groups as every kind that launches its own instances builds them (none, pcs, eks): the node runtime
asset, user data that mounts storage, installs collectors and runs the boot validator with the group's NodeProfile,
the AMI, and one `Ec2NodeGroup` per spec node group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from fmcluster.catalog import InstanceType
from fmcluster.constructs import boot_pointer
from fmcluster.constructs.launch_template import IMDS_HOP_LIMIT, LaunchTemplateProps, NodeLaunchTemplate
from fmcluster.constructs.node_bootstrap import (
    NodeRuntime,
    bootstrap_script,
    collectors_step,
    login_script,
    mime_user_data,
)
from fmcluster.constructs.node_group import Ec2NodeGroup
from fmcluster.platforms.storage import Mounts
from fmcluster.profiles import node_profile_json
from fmcluster.spec import ClusterSpec, NodeGroup

# the node_group label (and fmcluster:node-group tag) of a login node
LOGIN_NODE_GROUP = "login"


@dataclass(frozen=True)
class NodeImage:
    """What a kind whose launching service picks the AMI passes instead of the DLAMI and its user data.

    :param image_id: AMI id, or None to leave ImageId out of the launch template (EKS AMI types).
    :param user_data: the whole MIME user data.
    :param root_device_name: the image's root device (Amazon Linux 2023: ``/dev/xvda``).
    """

    image_id: Optional[str]
    user_data: str
    root_device_name: str


def construct_id(name: str) -> str:
    """`gpu-large` -> `GpuLarge`: stable construct ids (and logical ids) derived from the group name."""
    return "".join(part.capitalize() for part in name.split("-"))


class NodeGroupBuilder:
    """Builds the EC2 node groups of one cluster (placement group, EFA launch template, user data); the runtime asset
    is created once, in the first scope asked."""

    def __init__(
        self,
        *,
        spec: ClusterSpec,
        subnet_id: str,
        security_group_ids: Sequence[str],
        mounts: Optional[Mounts] = None,
        remote_write_url: Optional[str] = None,
        instance_tags: Optional[Dict[str, str]] = None,
    ) -> None:
        self.spec = spec
        self.subnet_id = subnet_id
        self.security_group_ids = list(security_group_ids)
        self.mounts = mounts if mounts is not None else Mounts()
        self.remote_write_url = remote_write_url
        self.instance_tags = dict(instance_tags or {})
        self._runtime: Optional[NodeRuntime] = None

    def runtime(self, scope: Construct) -> NodeRuntime:
        """The fmcluster runtime as an S3 asset (nodes fetch it at boot); grant its readers with `grant_read`."""
        if self._runtime is None:
            self._runtime = NodeRuntime(scope, "NodeRuntime")
        return self._runtime

    def boot(self, scope: Construct, *, group: str, key: str, level: str, policy: str,
             profile_json: Optional[str]) -> str:
        """Publish the group's boot pointer and return the user data lines that read it (constant across runtime and
        validation changes: they name the bucket, region, key and group only)."""
        runtime = self.runtime(scope)
        runtime.publish(key=key, group=group, level=level, policy=policy, profile_json=profile_json)
        return boot_pointer.read_pointer_shell(bucket=runtime.bucket.bucket_name, region=Stack.of(scope).region,
                                               key=key, group=group)

    def image_id(self, scope: Construct, group: NodeGroup) -> str:
        """The group's AMI, or its family's public SSM parameter, resolved by CloudFormation at deploy time (never
        looked up at synth)."""
        if group.ami_id:
            return group.ami_id
        parameter = group.image.default_parameter(group.instance.architecture)
        if parameter is None:  # the spec refuses this
            raise ValueError(f"group: {group.name} has no ami_id and {group.image_family} no default image")
        return ec2.MachineImage.from_ssm_parameter(parameter).get_image(scope).image_id

    def mount_steps(self, *, image: str, efa_client: bool, validated: bool = True) -> str:
        """Every store's boot lines (`BootMount`): its client where `image` lacks it, then the mount. Nodes without
        EFA (login nodes, CPU groups) reach a store over the plain network. Nodes the boot validator does not run on
        (login) apply validation.policy to a failed mount themselves."""
        lines = []
        for mount in self.mounts:
            if mount.boot is None:
                raise ValueError(f"mounts: store {mount.store} has no boot form; nodes from launch templates cannot "
                                 "mount it")
            lines.append(mount.boot.shell(image=image, efa=efa_client, fatal_under_fail=not validated))
        return "".join(lines)

    def bootstrap_shell(
        self,
        scope: Construct,
        group: NodeGroup,
        *,
        profile_json: Optional[str] = None,
        policy: Optional[str] = None,
        collectors: bool = True,
        before_mount: str = "",
        after_units: Sequence[str] = (),
        image: Optional[str] = None,
    ) -> str:
        """The shell script every node runs: read the group's boot pointer (the runtime, profile, level and policy it
        names, published here), mount the shared stores, install collectors, run the boot validator. A kind may pass
        its own profile (JSON) and node-side policy, leave the host collectors out (collectors: False), add shell
        lines before the mount, name the image its service boots where that is not the group's image family (the
        stores' clients are installed where an image lacks them), and with `after_units` run everything after the
        profile as a systemd unit ordered after those units (bootstrap_script)."""
        region = Stack.of(scope).region
        collector_lines = ""
        if collectors and self.remote_write_url is not None:
            collector_lines = collectors_step(cluster=self.spec.name, region=region,
                                              remote_write_url=self.remote_write_url, node_group=group.name,
                                              gpu=group.instance.is_gpu)
        boot = self.boot(scope, group=group.name, key=boot_pointer.group_key(group.name),
                         level=self.spec.validation.level, policy=policy or self.spec.validation_policy,
                         profile_json=profile_json if profile_json is not None else node_profile_json(self.spec, group))
        return bootstrap_script(
            boot=boot,
            collectors=collector_lines,
            mount=before_mount + self.mount_steps(image=image or group.image_family, efa_client=group.efa_enabled),
            after_units=after_units,
        )

    def user_data(self, scope: Construct, group: NodeGroup) -> str:
        return mime_user_data(self.bootstrap_shell(scope, group))

    def build(
        self,
        scope: Construct,
        group: NodeGroup,
        *,
        instance_profile_arn: Optional[str] = None,
        set_instance_type: bool = True,
        in_subnet: bool = True,
        image: Optional[NodeImage] = None,
        imds_hop_limit: int = IMDS_HOP_LIMIT,
    ) -> Ec2NodeGroup:
        """The node group's placement group and launch template. ``set_instance_type`` False leaves the
        instance type (and the profile) to the service launching from the template (PCS); ``in_subnet`` False
        leaves the subnet out (EKS managed node groups take theirs from the node group and refuse one in the
        template); ``image`` replaces the DLAMI and its user data; ``imds_hop_limit`` 1 keeps IMDS from containers
        outside the host network (Kubernetes kinds whose pods get credentials from Pod Identity)."""
        built = Ec2NodeGroup(
            scope,
            construct_id(group.name),
            template=LaunchTemplateProps(
                instance=group.instance,
                efa=group.efa_enabled,
                capacity_type=group.capacity.type,
                reservation_id=group.capacity.reservation_id,
                security_group_ids=self.security_group_ids,
                subnet_id=self.subnet_id if in_subnet else None,
                image_id=image.image_id if image is not None else self.image_id(scope, group),
                user_data=image.user_data if image is not None else self.user_data(scope, group),
                instance_type=group.instance_type if set_instance_type else None,
                instance_profile_arn=instance_profile_arn,
                root_volume_gib=group.root_volume_gib,
                root_device_name=image.root_device_name if image is not None else group.image.root_device,
                tags={**self.instance_tags, "fmcluster:node-group": group.name},
                imds_hop_limit=imds_hop_limit,
            ),
            placement_strategy=group.placement_strategy,
            partitions=group.placement.partitions if group.placement else None,
            existing_placement_group=group.existing_placement_group,
        )
        if self._runtime is not None:  # an image of the kind's own may not fetch the runtime
            self._runtime.required_by(built)
        return built

    def login_collectors(self, scope: Construct) -> str:
        """The login node's collectors: node metrics, and Slurm's node states where the kind runs Slurm, since a
        managed controller (AWS PCS) cannot run a collector and the login node has Slurm's client commands."""
        if self.remote_write_url is None:
            return ""
        return collectors_step(cluster=self.spec.name, region=Stack.of(scope).region,
                               remote_write_url=self.remote_write_url, node_group=LOGIN_NODE_GROUP, gpu=False,
                               slurm=self.spec.orchestrator_kind.nodes.agent == "slurm")

    def login_node(self, scope: Construct, id: str, *, instance: InstanceType, image_id: str, image: str,
                   root_device_name: str) -> NodeLaunchTemplate:
        """A login node's launch template: no EFA, no GPU to validate, the shared stores mounted (`image`: the image
        family of `image_id`, for the stores' clients)."""
        template = NodeLaunchTemplate(scope, id, props=LaunchTemplateProps(
            instance=instance,
            efa=False,
            security_group_ids=self.security_group_ids,
            subnet_id=self.subnet_id,
            image_id=image_id,
            root_device_name=root_device_name,
            user_data=mime_user_data(
                login_script(boot=self.boot(scope, group=LOGIN_NODE_GROUP, key=boot_pointer.LOGIN_KEY,
                                            level=self.spec.validation.level, policy=self.spec.validation_policy,
                                            profile_json=None),
                             mount=self.mount_steps(image=image, efa_client=False, validated=False),
                             collectors=self.login_collectors(scope))
            ),
            root_volume_gib=100,
            tags={**self.instance_tags, "fmcluster:node-group": LOGIN_NODE_GROUP},
        ))
        self.runtime(scope).required_by(template)
        return template

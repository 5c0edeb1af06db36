"""`<name>-cluster`: compute — placement groups, EFA launch templates, node role, the node
runtime, and the orchestrator. Replaceable: destroying it touches no data."""

from __future__ import annotations

from typing import Any, Dict, Optional

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster import catalog
from fmcluster.constructs.efa import UltraClusterPlacementGroup
from fmcluster.constructs.launch_template import GpuNodeLaunchTemplate
from fmcluster.constructs.node_bootstrap import (
    NodeRuntime,
    bootstrap_script,
    collectors_step,
    login_script,
    mime_user_data,
    mount_step,
)
from fmcluster.constructs.node_role import NodeRole
from fmcluster.constructs.pcs import PcsCluster
from fmcluster.nag import acknowledge
from fmcluster.profiles import node_profile_json
from fmcluster.spec import ClusterSpec, NodeGroup
from fmcluster.stacks.hyperpod import HyperPodOrchestration
from fmcluster.stacks.network import NetworkStack
from fmcluster.stacks.observability import ObservabilityStack
from fmcluster.stacks.storage import StorageStack

# AWS's public SSM parameters for the Deep Learning Base OSS NVIDIA Driver GPU AMI
# (DLAMI developer guide: /aws/service/deeplearning/ami/$architecture/$ami_type/latest/ami-id,
# ami_type = the AMI name without "deep", "learning", "ami"). Resolved by CloudFormation
# at deploy time, never looked up at synth.
DLAMI_SSM_PARAMETER = {
    "x86_64": "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    "arm64": "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
}
AGENT_SERVICE = {"pcs": "slurmd"}


class ClusterStack(Stack):
    """Exposes ``node_role``, ``runtime``, ``launch_templates`` and ``placement_groups``
    (by group name), ``pcs`` (the PcsCluster, when the orchestrator is PCS) and ``hyperpod``
    (role, lifecycle scripts and cluster, when it is HyperPod; then there is no node role,
    launch template or placement group: HyperPod launches and places the instances)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        spec: ClusterSpec,
        network: NetworkStack,
        storage: Optional[StorageStack] = None,
        observability: Optional[ObservabilityStack] = None,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        self.spec = spec
        self.network = network
        self.storage = storage
        self.observability = observability
        self.subnet_id = network.node_subnets[0].subnet_id
        self.security_group_ids = [network.efa.security_group_id]
        self.launch_templates: Dict[str, GpuNodeLaunchTemplate] = {}
        self.placement_groups: Dict[str, UltraClusterPlacementGroup] = {}
        self.pcs: Optional[PcsCluster] = None
        self.hyperpod: Optional[HyperPodOrchestration] = None
        self.node_role: Optional[NodeRole] = None
        if storage is not None:
            self.add_stack_dependency(storage)
        if spec.orchestrator.is_hyperpod:
            self.hyperpod = self._add_hyperpod()
            self._grant_node_access(self.hyperpod.role)
            return
        is_pcs = spec.orchestrator.type == "pcs"
        self.node_role = NodeRole(
            self, "NodeRole", path="/aws-pcs/" if is_pcs else "/", description=f"fmcluster {spec.name} nodes"
        )
        self.runtime = NodeRuntime(self, "NodeRuntime")
        self.runtime.grant_read(self.node_role.role)
        self._grant_node_access(self.node_role.role)
        # launch templates do not pass stack tags to instances: name them explicitly
        self._instance_tags = {"fmcluster:cluster": spec.name, **spec.tags}
        if is_pcs:
            nodes = sum(g.count for g in spec.node_groups) + 1
            self.pcs = PcsCluster(
                self,
                "Pcs",
                subnet_ids=[self.subnet_id],
                security_group_ids=self.security_group_ids,
                slurm_version=spec.orchestrator.pcs.slurm_version,
                size=spec.orchestrator.pcs_size(nodes),
                scale_down_idle_seconds=spec.orchestrator.pcs.scale_down_idle_seconds,
            )
            self.node_role.add_to_policy(
                iam.PolicyStatement(
                    sid="PcsRegistersNodes",
                    actions=["pcs:RegisterComputeNodeGroupInstance"],
                    resources=["*"],
                )
            )
            acknowledge(
                self.node_role,
                "AwsSolutions-IAM5[Resource::*]",
                "pcs:RegisterComputeNodeGroupInstance supports no resource-level permissions (PCS user guide), "
                "so it uses Resource *, beside the SSM agent actions NodeRole acknowledges.",
            )
            CfnOutput(self, "PcsClusterId", value=self.pcs.cluster_id)
        for group in spec.node_groups:
            self._add_node_group(group)
        if self.pcs is not None:
            self._add_pcs_login()
        CfnOutput(self, "NodeRoleArn", value=self.node_role.role.role_arn)

    def _grant_node_access(self, grantee: iam.IGrantable) -> None:
        """What every node may reach: AMP remote write, and the data bucket (checkpoints and datasets
        also move to and from S3 directly, not only through the FSx links)."""
        if self.observability is not None:
            self.observability.grant_remote_write(grantee)
        if self.storage is not None:
            self.storage.grant_data_access(grantee)

    def _fsx_parameters(self) -> Optional[Dict[str, Any]]:
        if self.storage is None or self.storage.file_system is None:
            return None
        fsx = self.spec.storage.fsx
        assert fsx is not None
        fs = self.storage.file_system
        return {"dns_name": fs.dns_name, "mount_name": fs.mount_name, "mount_point": fsx.mount_point, "efa": fsx.efa}

    def _add_hyperpod(self) -> HyperPodOrchestration:
        return HyperPodOrchestration(
            self,
            "HyperPod",
            spec=self.spec,
            subnets=self.network.node_subnets[:1],
            security_groups=[self.network.efa.security_group],
            fsx=self._fsx_parameters(),
            remote_write_url=self.observability.remote_write_url if self.observability is not None else None,
        )

    def _image_id(self, group: NodeGroup) -> str:
        if group.ami_id:
            return group.ami_id
        arch = group.instance.architecture
        return ec2.MachineImage.from_ssm_parameter(DLAMI_SSM_PARAMETER[arch]).get_image(self).image_id

    def _mount(self, efa_client: bool = True) -> str:
        """The FSx mount step; nodes without EFA (login nodes) reach an EFA-enabled file system over TCP."""
        if self.storage is None or self.storage.file_system is None:
            return ""
        fs = self.storage.file_system
        assert self.spec.storage.fsx is not None and self.storage.mount_point is not None
        return mount_step(dns_name=fs.dns_name, mount_name=fs.mount_name, mount_point=self.storage.mount_point,
                          efa=self.spec.storage.fsx.efa and efa_client)

    def _user_data(self, group: NodeGroup) -> str:
        collectors = ""
        if self.observability is not None:
            collectors = collectors_step(
                cluster=self.spec.name,
                region=self.region,
                remote_write_url=self.observability.remote_write_url,
                node_group=group.name,
                gpu=group.instance.is_gpu,
            )
        return mime_user_data(
            bootstrap_script(
                runtime_s3_url=self.runtime.s3_url,
                region=self.region,
                profile_json=node_profile_json(self.spec, group),
                level=self.spec.validation.level,
                policy=self.spec.validation.policy,
                agent=AGENT_SERVICE.get(self.spec.orchestrator.type, "none"),
                collectors=collectors,
                mount=self._mount(efa_client=group.efa_enabled),
            )
        )

    def _add_node_group(self, group: NodeGroup) -> None:
        assert self.node_role is not None
        gid = _construct_id(group.name)
        placement: Optional[UltraClusterPlacementGroup] = None
        if group.placement_strategy != "none":
            placement = UltraClusterPlacementGroup(
                self,
                f"{gid}Placement",
                strategy=group.placement_strategy,
                partitions=group.placement.partitions if group.placement else None,
            )
            self.placement_groups[group.name] = placement
            CfnOutput(self, f"{gid}PlacementGroup", value=placement.group_name)
        is_pcs = self.pcs is not None
        lt = GpuNodeLaunchTemplate(
            self,
            f"{gid}LaunchTemplate",
            instance=group.instance,
            efa=group.efa_enabled,
            security_group_ids=self.security_group_ids,
            subnet_id=self.subnet_id,
            image_id=self._image_id(group),
            user_data=self._user_data(group),
            placement_group_name=placement.group_name if placement else None,
            capacity_type=group.capacity.type,
            reservation_id=group.capacity.reservation_id,
            instance_type=None if is_pcs else group.instance_type,
            instance_profile_arn=None if is_pcs else self.node_role.instance_profile_arn,
            root_volume_gib=group.root_volume_gib,
            tags={**self._instance_tags, "fmcluster:node-group": group.name},
        )
        self.launch_templates[group.name] = lt
        CfnOutput(self, f"{gid}LaunchTemplateId", value=lt.launch_template_id)
        if self.pcs is not None:
            assert group.ami_id, "the spec requires ami_id with PCS"
            self.pcs.add_node_group(
                f"{gid}NodeGroup",
                name=group.name,
                instance_type=group.instance_type,
                min_count=group.count,
                max_count=group.count,
                launch_template=lt,
                instance_profile_arn=self.node_role.instance_profile_arn,
                subnet_ids=[self.subnet_id],
                ami_id=group.ami_id,
                capacity_type=group.capacity.type,
            )

    def _add_pcs_login(self) -> None:
        assert self.pcs is not None and self.node_role is not None
        login_type = self.spec.orchestrator.pcs.login_instance_type
        ami = self.spec.login_ami_id
        assert ami, "the spec requires a login AMI with PCS"
        lt = GpuNodeLaunchTemplate(
            self,
            "LoginLaunchTemplate",
            instance=catalog.get(login_type),
            efa=False,
            security_group_ids=self.security_group_ids,
            subnet_id=self.subnet_id,
            image_id=ami,
            user_data=mime_user_data(
                login_script(runtime_s3_url=self.runtime.s3_url, region=self.region,
                             mount=self._mount(efa_client=False))
            ),
            root_volume_gib=100,
            tags={**self._instance_tags, "fmcluster:node-group": "login"},
        )
        self.launch_templates["login"] = lt
        self.pcs.add_node_group(
            "LoginNodeGroup",
            name="login",
            instance_type=login_type,
            min_count=1,
            max_count=1,
            launch_template=lt,
            instance_profile_arn=self.node_role.instance_profile_arn,
            subnet_ids=[self.subnet_id],
            ami_id=ami,
            queue=False,
        )


def _construct_id(name: str) -> str:
    """`gpu-large` → `GpuLarge`: stable logical ids derived from the group name."""
    return "".join(part.capitalize() for part in name.split("-"))



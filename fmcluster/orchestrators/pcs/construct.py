"""AWS PCS on the cluster's EFA node groups: a PCS cluster in the node subnet, one compute node group and
queue per node group (static: min = max = count; elastic: min_count static instances, up to max_count started for
jobs and stopped after scale_down_idle_seconds) launched from the group's launch template, and one login
node."""

from __future__ import annotations

from typing import Dict

from aws_cdk import CfnOutput
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster import catalog
from fmcluster.nag import acknowledge
from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.orchestrators.pcs.cluster import PcsCluster
from fmcluster.orchestrators.pcs.settings import PcsOrchestrator, instances, login_ami_id, login_image
from fmcluster.platforms.ec2.access import session_command
from fmcluster.platforms.ec2.node_builder import LOGIN_NODE_GROUP, construct_id
from fmcluster.platforms.ec2.nodes import Ec2Nodes
from fmcluster.runtime import health_check
from fmcluster.runtime.observability.slurm_job_map import hook_path

# PCS requires its instance roles under this path (or named AWSPCS...) (PCS user guide, "IAM instance profiles").
PCS_ROLE_PATH = "/aws-pcs/"


def job_map_hooks(context: OrchestrationContext) -> Dict[str, str]:
    """Slurm's Prolog and Epilog: the hooks that tell dcgm-exporter which job holds each GPU (its hpc_job label).
    Only when the spec asks (orchestrator.pcs.gpu_job_map) and with observability: the collectors' install writes
    the hooks on every node, in user data, which PCS runs before slurmd starts (PCS user guide, "Working with Amazon
    EC2 user data"). A node launched before its runtime wrote them has none, and Slurm drains a node whose Prolog is
    missing: hence opt-in, never switched on under running nodes by an upgrade."""
    if not PcsOrchestrator.of(context.spec).pcs.gpu_job_map or context.remote_write_url is None:
        return {}
    return {"Prolog": hook_path("prolog"), "Epilog": hook_path("epilog")}


def health_check_settings(context: OrchestrationContext) -> Dict[str, str]:
    """HealthCheckProgram, -Interval and -NodeState when the spec asks (orchestrator.pcs.health_check): the program
    each node's boot writes before slurmd starts (runtime/node_bootstrap.sh). Opt-in for the same reason as the job
    map: a node booted before its runtime wrote the program has none, and that PCS accepts the parameters at the
    cluster level is unverified (docs/resilience.md)."""
    settings = PcsOrchestrator.of(context.spec).pcs
    if not settings.health_check:
        return {}
    return health_check.slurm_settings(health_check.program_path(), settings.health_check_interval_seconds)


class PcsOrchestration(Ec2Nodes):
    """Exposes ``pcs`` (the `PcsCluster`), ``login_template`` and what `Ec2Nodes` exposes."""

    def __init__(self, scope: Construct, id: str, *, context: OrchestrationContext) -> None:
        super().__init__(scope, id, spec=context.spec, node_builder=context.node_builder, role_path=PCS_ROLE_PATH,
                         set_instance_type=False)
        self.context = context
        spec = context.spec
        settings = PcsOrchestrator.of(spec)
        self.pcs = PcsCluster(
            self,
            "Pcs",
            subnet_ids=context.subnet_ids[:1],
            security_group_ids=context.security_group_ids,
            slurm_version=settings.pcs.slurm_version,
            size=settings.size_for(instances(spec)),
            scale_down_idle_seconds=settings.pcs.scale_down_idle_seconds,
            slurm_settings={**job_map_hooks(context), **health_check_settings(context)},
        )
        self.node_role.add_to_policy(
            iam.PolicyStatement(sid="PcsRegistersNodes", actions=["pcs:RegisterComputeNodeGroupInstance"],
                                resources=["*"])
        )
        acknowledge(
            self.node_role,
            "AwsSolutions-IAM5[Resource::*]",
            "pcs:RegisterComputeNodeGroupInstance supports no resource-level permissions (PCS user guide), "
            "so it uses Resource *, beside the SSM agent actions NodeRole acknowledges.",
        )
        CfnOutput(self, "PcsClusterId", value=self.pcs.cluster_id)
        CfnOutput(self, "LoginSessionCommand", value=session_command(region=spec.region, cluster=spec.name,
                                                                      group=LOGIN_NODE_GROUP),
                  description="A shell on the login node (Session Manager; the Session Manager plugin for the AWS CLI)")
        for group in spec.node_groups:
            if not group.ami_id:
                raise ValueError(f"context: node group {group.name} has no ami_id, which PCS requires")
            self.pcs.add_node_group(
                f"{construct_id(group.name)}NodeGroup",
                name=group.name,
                instance_type=group.instance_type,
                min_count=group.min_size,
                max_count=group.max_size,
                launch_template=self.node_groups[group.name].launch_template,
                instance_profile_arn=self.node_role.instance_profile_arn,
                subnet_ids=context.subnet_ids[:1],
                ami_id=group.ami_id,
                capacity_type=group.capacity.type,
            )
        self._add_login(settings.pcs.login_instance_type)

    def _add_login(self, login_type: str) -> None:
        ami = login_ami_id(self.context.spec)
        if not ami:
            raise ValueError("context: no login AMI (orchestrator.pcs.login_ami_id or an x86_64 group's ami_id)")
        image = login_image(self.context.spec)
        self.login_template = self.context.node_builder.login_node(
            self, "LoginLaunchTemplate", instance=catalog.get(login_type), image_id=ami, image=image.name,
            root_device_name=image.root_device,
        )
        self.context.node_builder.runtime(self).grant_read(self.node_role.role, login=True)
        self.pcs.add_node_group(
            "LoginNodeGroup",
            name="login",
            instance_type=login_type,
            min_count=1,
            max_count=1,
            launch_template=self.login_template,
            instance_profile_arn=self.node_role.instance_profile_arn,
            subnet_ids=self.context.subnet_ids[:1],
            ami_id=ami,
            queue=False,
        )

"""SageMaker HyperPod with Slurm, composed from the spec: instance role, lifecycle bucket with its scripts
and parameters, and the AWS::SageMaker::Cluster."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.orchestrators.hyperpod_slurm.settings import CONTROLLER_GROUP, LOGIN_GROUP, HyperPodSlurmOrchestrator
from fmcluster.platforms.hyperpod.access import session_command
from fmcluster.platforms.hyperpod.cluster import HyperPodInstanceGroup, HyperPodSlurmCluster
from fmcluster.platforms.hyperpod.instance_role import HyperPodInstanceRole
from fmcluster.platforms.hyperpod.lifecycle import LifecycleScripts
from fmcluster.platforms.hyperpod.mounts import SLURM_IMAGE, lifecycle_mounts
from fmcluster.platforms.storage import HYPERPOD, Mounts
from fmcluster.profiles import node_profile_json
from fmcluster.runtime.contract import LIFECYCLE_PARAMETERS_VERSION, SLURM_ENTRY_SCRIPT, ml_type
from fmcluster.spec import ClusterSpec


class HyperPodSlurmOrchestration(Construct):
    """Exposes ``role`` (the nodes' instance role; ``grantee``), ``lifecycle`` and ``cluster``."""

    def __init__(self, scope: Construct, id: str, *, context: OrchestrationContext) -> None:
        super().__init__(scope, id)
        spec = context.spec
        subnets, security_groups = context.subnets[:1], context.security_groups
        mounts, remote_write_url = context.mounts, context.remote_write_url
        settings = HyperPodSlurmOrchestrator.of(spec).hyperpod
        self.role = HyperPodInstanceRole(
            self, "InstanceRole", cluster_name=spec.name, subnets=subnets, security_groups=security_groups
        )
        # One side mounts each store, never both: HyperPod (InstanceStorageConfigs) where the store gives HyperPod's
        # form, else the lifecycle scripts (fmcluster/platforms/hyperpod/node/README.md).
        groups = instance_groups(spec, [m.services[HYPERPOD] for m in mounts.served_by(HYPERPOD)])
        self.lifecycle = LifecycleScripts(
            self,
            "Lifecycle",
            cluster_name=spec.name,
            parameters=lifecycle_parameters(spec, Stack.of(self).region, mounts, remote_write_url),
            profiles={g.name: node_profile_json(spec, g) for g in spec.node_groups},
            entries={entry_script(g.name): g.name for g in groups},
        )
        self.cluster = HyperPodSlurmCluster(
            self,
            "Cluster",
            cluster_name=spec.name,
            instance_groups=groups,
            role=self.role,
            lifecycle=self.lifecycle,
            subnets=subnets,
            security_groups=security_groups,
            node_recovery=settings.node_recovery,
            slurm_config_strategy=settings.slurm_config_strategy,
        )
        CfnOutput(scope, "HyperPodClusterArn", value=self.cluster.cluster_arn)
        CfnOutput(scope, "HyperPodClusterName", value=spec.name)
        CfnOutput(
            scope,
            "ControllerSsmTarget",
            description="Append the controller's instance id (aws sagemaker list-cluster-nodes --cluster-name "
            f"{spec.name} --instance-group-name-contains {CONTROLLER_GROUP}), then: aws ssm start-session --target ...",
            value=self.cluster.ssm_target(CONTROLLER_GROUP, ""),
        )
        # where users work: the login group when there is one, else the controller
        user_group = LOGIN_GROUP if settings.login_instance_type else CONTROLLER_GROUP
        CfnOutput(scope, "SessionCommand", description=f"A shell on the {user_group} node (Session Manager; the "
                  "Session Manager plugin for the AWS CLI)",
                  value=session_command(region=spec.region, cluster=spec.name, group=user_group,
                                        cluster_id=self.cluster.cluster_id))

    @property
    def grantee(self) -> iam.IGrantable:
        return self.role


def entry_script(group: str) -> str:
    return SLURM_ENTRY_SCRIPT.format(group=group)


def instance_groups(spec: ClusterSpec, storage: Sequence[Mapping[str, Any]] = ()) -> List[HyperPodInstanceGroup]:
    """The controller, the optional login group, and one Compute group (and partition) per node group; HyperPod
    mounts the stores of `storage` (their InstanceStorageConfigs entries) on every node."""
    settings = HyperPodSlurmOrchestrator.of(spec).hyperpod

    def group(name: str, instance_type: str, count: int, node_type: str, **extra: Any) -> HyperPodInstanceGroup:
        return HyperPodInstanceGroup(name=name, instance_type=instance_type, count=count, node_type=node_type,
                                     threads_per_core=settings.threads_per_core, ebs_volume_gib=settings.volume_gib,
                                     storage=tuple(storage), entry_script=entry_script(name), **extra)

    groups = [group(CONTROLLER_GROUP, settings.controller_instance_type, 1, "Controller")]
    if settings.login_instance_type:
        groups.append(group(LOGIN_GROUP, settings.login_instance_type, settings.login_count, "Login"))
    for g in spec.node_groups:
        groups.append(group(
            g.name, ml_type(g.instance_type), g.count, "Compute",
            partitions=(g.name,),
            deep_health_checks=settings.deep_health_checks and g.role == "gpu",
            training_plan_arn=g.capacity.training_plan_arn,
            efa_only=True if g.efa_enabled else None,
        ))
    return groups


def lifecycle_parameters(
    spec: ClusterSpec, region: str, mounts: Mounts, remote_write_url: Optional[str]
) -> Dict[str, Any]:
    """fmcluster_parameters.json, the contract with the lifecycle scripts (fmcluster/platforms/hyperpod/node/README.md):
    the stores HyperPod does not mount itself are the nodes' to mount."""
    settings = HyperPodSlurmOrchestrator.of(spec).hyperpod
    return {
        "version": LIFECYCLE_PARAMETERS_VERSION,
        "workload_manager": "slurm",
        "cluster_name": spec.name,
        "region": region,
        "controller_group": CONTROLLER_GROUP,
        "login_group": LOGIN_GROUP if settings.login_instance_type else None,
        "worker_groups": [
            {"instance_group_name": g.name, "partition_name": g.name, "instance_type": ml_type(g.instance_type),
             "gpu": g.instance.is_gpu, "efa": g.efa_enabled}
            for g in spec.node_groups
        ],
        **lifecycle_mounts(mounts, mounts.mounted_by_nodes(HYPERPOD), image=SLURM_IMAGE),
        "validation": {"level": spec.validation.level, "policy": spec.validation_policy},
        "observability": (
            {"remote_write_url": remote_write_url, "scrape_interval_seconds": spec.observability.scrape_interval_seconds,
             "gpu_job_map": settings.gpu_job_map}
            if remote_write_url else None
        ),
        "users": [u.model_dump() for u in settings.users],
    }

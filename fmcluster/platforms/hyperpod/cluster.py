"""SageMaker HyperPod with the Slurm orchestrator (AWS::SageMaker::Cluster), as a typed
wrapper over ``aws_sagemaker.CfnCluster``.

Facts used (CloudFormation/API references, botocore 1.44 service model):
- instance group: name 1-63 chars ``[a-zA-Z0-9](-*[a-zA-Z0-9])*``, ``ml.*`` instance type,
  ThreadsPerCore 1|2, InstanceStorageConfigs.EbsVolumeConfig (an extra EBS volume mounted at
  /opt/sagemaker), OnStartDeepHealthChecks InstanceStress|InstanceConnectivity, TrainingPlanArn,
  SlurmConfig{NodeType Controller|Login|Compute, PartitionNames (at most 1)}
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-sagemaker-cluster-clusterinstancegroup.html
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterSlurmConfigDetails.html
- Orchestrator.Slurm.SlurmConfigStrategy Managed|Overwrite|Merge
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterOrchestratorSlurmConfig.html
  (the service default is not documented: unverified; we always send Managed unless told otherwise)
- NodeRecovery Automatic|None; LifeCycleConfig.SourceS3Uri must start ``s3://sagemaker-``
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html
- HyperPod instance types (botocore ClusterInstanceType): ml.p4d/p4de.24xlarge, ml.p5.48xlarge,
  ml.p5e/p5en.48xlarge, ml.p6-b200/p6-b300.48xlarge, ml.p6e-gb200.36xlarge, ml.trn1/trn1n/trn2,
  ml.g5/g6/g6e, ml.c5/m5/t3 and more; the spec/catalog decide which the user may pick.
- SSM: nodes are reached with ``aws ssm start-session --target sagemaker-cluster:<cluster-id>_<group>-<instance-id>``
  where cluster-id is the last part of the cluster ARN (HyperPod developer guide, "Access your
  SageMaker HyperPod cluster nodes", example ``sagemaker-cluster:aa11bbbbb222_controller-group-i-111222333444555aa``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from aws_cdk import CfnTag, Fn
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from fmcluster.platforms.hyperpod.instance_role import (
    HyperPodInstanceRole,
    SecurityGroupRef,
    SubnetRef,
    security_group_id,
    subnet_id,
)
from fmcluster.platforms.hyperpod.lifecycle import LifecycleScripts
from fmcluster.runtime.contract import ML_PREFIX

NODE_TYPES = ("Controller", "Login", "Compute")


SLURM_CONFIG_STRATEGIES = ("Managed", "Overwrite", "Merge")
NODE_RECOVERY = ("Automatic", "None")
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity")
NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
# Kubernetes label and taint keys (an optional DNS-subdomain prefix and a name) and values, as the
# ClusterKubernetesTaint schema has them (CloudFormation, AWS::SageMaker::Cluster).
KUBERNETES_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
KUBERNETES_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class HyperPodInstanceGroup:
    """One HyperPod instance group.

    :param name: instance group name (1-63 chars, alphanumerics and inner hyphens).
    :param instance_type: a HyperPod type, ``ml.`` prefixed (e.g. ``ml.p5.48xlarge``).
    :param count: instances in the group (0 for a group HyperPod's autoscaling sizes).
    :param node_type: Slurm role of the group: Controller | Login | Compute; None on EKS (no SlurmConfig).
    :param partitions: Slurm partition of a Compute group (HyperPod allows at most one).
    :param threads_per_core: 1 (SMT off, the usual choice for GPU training) or 2.
    :param ebs_volume_gib: size of the extra EBS volume mounted at /opt/sagemaker; None: none.
    :param deep_health_checks: run InstanceStress and InstanceConnectivity deep health checks
        when instances start (GPU/Trainium types only).
    :param training_plan_arn: SageMaker training plan whose reserved capacity the group uses.
    :param efa_only: EFA interfaces as ``efa-only`` (no IP address each; API ClusterNetworkInterface),
        as the EC2 launch templates lay them out; None leaves HyperPod's default.
    :param storage: shared stores HyperPod mounts before the lifecycle script runs (OnInitComplete): each store's
        InstanceStorageConfigs entry as CloudFormation writes it (the storage contract's HyperPod form), added to the
        cluster's template after the EBS volume (`storage_override`).
    :param kubernetes_labels: EKS: labels of the group's nodes (KubernetesConfig.Labels).
    :param kubernetes_taints: EKS: taints of the group's nodes (``{"key", "value", "effect"}``); HyperPod refuses them
        on groups with deep health checks.
    :param entry_script: the lifecycle entry script under the lifecycle prefix; None: the lifecycle's default.
    """

    name: str
    instance_type: str
    count: int
    node_type: Optional[str] = "Compute"
    partitions: Tuple[str, ...] = ()
    threads_per_core: int = 1
    ebs_volume_gib: Optional[int] = None
    deep_health_checks: bool = False
    training_plan_arn: Optional[str] = None
    efa_only: Optional[bool] = None
    storage: Tuple[Mapping[str, Any], ...] = ()
    kubernetes_labels: Optional[Dict[str, str]] = None
    kubernetes_taints: Tuple[Dict[str, str], ...] = ()
    entry_script: Optional[str] = None

    def check(self) -> None:
        """Raise ValueError naming the first prop HyperPod would refuse."""
        where = f"instance_groups[{self.name!r}]"
        if not (NAME.match(self.name) and len(self.name) <= 63):
            raise ValueError(f"{where}.name: 1-63 chars of letters, digits and inner hyphens")
        if not self.instance_type.startswith(ML_PREFIX):
            raise ValueError(f"{where}.instance_type: {self.instance_type!r} must start with {ML_PREFIX!r}")
        if self.count < 0:
            raise ValueError(f"{where}.count: must be at least 0 (0: an autoscaled group, which starts empty)")
        if self.node_type is not None and self.node_type not in NODE_TYPES:
            raise ValueError(f"{where}.node_type: must be one of {', '.join(NODE_TYPES)} (or None on EKS)")
        if self.threads_per_core not in (1, 2):
            raise ValueError(f"{where}.threads_per_core: must be 1 or 2")
        if self.node_type == "Compute":
            if len(self.partitions) > 1:
                raise ValueError(f"{where}.partitions: HyperPod allows at most one Slurm partition per group")
            for p in self.partitions:
                if not NAME.match(p):
                    raise ValueError(f"{where}.partitions: {p!r} must be letters, digits and inner hyphens")
        elif self.partitions:
            raise ValueError(f"{where}.partitions: only Compute groups have partitions")
        if self.ebs_volume_gib is not None and not 1 <= self.ebs_volume_gib <= 16384:
            raise ValueError(f"{where}.ebs_volume_gib: must be 1-16384")
        for key, value in (self.kubernetes_labels or {}).items():
            if not KUBERNETES_KEY.match(key) or not KUBERNETES_VALUE.match(value) or len(value) > 63:
                raise ValueError(f"{where}.kubernetes_labels: {key}={value} is not a Kubernetes label")
        for taint in self.kubernetes_taints:
            if not KUBERNETES_KEY.match(taint.get("key", "")) or taint.get("effect") not in TAINT_EFFECTS \
                    or not KUBERNETES_VALUE.match(taint.get("value", "")):
                raise ValueError(f"{where}.kubernetes_taints: {taint} is not a taint (key, value, effect "
                                 f"{'|'.join(TAINT_EFFECTS)})")
        if self.kubernetes_taints and self.deep_health_checks:
            raise ValueError(f"{where}.kubernetes_taints: HyperPod refuses custom taints on an instance group with deep "
                             "health checks")

    def _kubernetes_config(self) -> Optional[sagemaker.CfnCluster.ClusterKubernetesConfigProperty]:
        if not self.kubernetes_labels and not self.kubernetes_taints:
            return None
        return sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
            labels=dict(self.kubernetes_labels) if self.kubernetes_labels else None,
            taints=[sagemaker.CfnCluster.ClusterKubernetesTaintProperty(key=t["key"], value=t.get("value") or None,
                                                                        effect=t["effect"])
                    for t in self.kubernetes_taints] or None,
        )

    def storage_override(self, index: int) -> Optional[Tuple[str, List[Dict[str, Any]]]]:
        """With stores to mount, the group's whole InstanceStorageConfigs in CloudFormation's own shape (the EBS
        volume's entry, then each store's as the store gives it): (property override path, value) for the group at
        `index` of the cluster; None without stores (the L1 property renders the EBS volume alone)."""
        if not self.storage:
            return None
        ebs = [{"EbsVolumeConfig": {"VolumeSizeInGB": self.ebs_volume_gib}}] if self.ebs_volume_gib is not None else []
        return f"InstanceGroups.{index}.InstanceStorageConfigs", ebs + [dict(entry) for entry in self.storage]

    def render(self, *, role_arn: str, lifecycle: LifecycleScripts) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        storage = []
        if self.ebs_volume_gib is not None:
            storage.append(sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(volume_size_in_gb=self.ebs_volume_gib)
            ))
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=self.name,
            instance_type=self.instance_type,
            instance_count=self.count,
            execution_role=role_arn,
            threads_per_core=self.threads_per_core,
            life_cycle_config=lifecycle.config_for(self.entry_script),
            slurm_config=None if self.node_type is None else sagemaker.CfnCluster.ClusterSlurmConfigProperty(
                node_type=self.node_type, partition_names=list(self.partitions) or None
            ),
            kubernetes_config=self._kubernetes_config(),
            instance_storage_configs=storage or None,
            on_start_deep_health_checks=list(DEEP_HEALTH_CHECKS) if self.deep_health_checks else None,
            training_plan_arn=self.training_plan_arn,
            network_interface=None if self.efa_only is None else sagemaker.CfnCluster.ClusterNetworkInterfaceProperty(
                interface_type="efa-only" if self.efa_only else "efa"
            ),
        )


def check_cluster_props(*, cluster_name: str, instance_groups: Sequence[HyperPodInstanceGroup], node_recovery: str,
                        subnets: Sequence[object], security_groups: Sequence[object]) -> None:
    """What every HyperPod cluster's props must satisfy, whatever orchestrates it (ValueError naming the prop)."""
    if not (NAME.match(cluster_name) and len(cluster_name) <= 63):
        raise ValueError(f"cluster_name: {cluster_name!r} must be 1-63 chars of letters, digits and inner hyphens")
    for group in instance_groups:
        group.check()
    names = [g.name for g in instance_groups]
    if len(set(names)) != len(names):
        raise ValueError(f"instance_groups: names must be unique: {names}")
    if node_recovery not in NODE_RECOVERY:
        raise ValueError(f"node_recovery: must be one of {', '.join(NODE_RECOVERY)}")
    if not subnets or not security_groups:
        raise ValueError("subnets, security_groups: at least one of each")


def wait_for_node_inputs(cluster: Construct, *, lifecycle: LifecycleScripts, role: HyperPodInstanceRole) -> None:
    """Nodes run the lifecycle script as they are created: the scripts, the runtime and the role's policy must exist
    before the cluster does."""
    for deployment in lifecycle.deployments:
        cluster.node.add_dependency(deployment)
    policy = role.role.node.try_find_child("DefaultPolicy")
    if policy is not None:
        cluster.node.add_dependency(policy)


def cfn_cluster(scope: Construct, *, cluster_name: str, instance_groups: Sequence[HyperPodInstanceGroup],
                role: HyperPodInstanceRole, lifecycle: LifecycleScripts,
                orchestrator: sagemaker.CfnCluster.OrchestratorProperty, node_recovery: str,
                subnets: Sequence[SubnetRef], security_groups: Sequence[SecurityGroupRef],
                node_provisioning_mode: Optional[str] = None,
                tags: Optional[Dict[str, str]] = None) -> sagemaker.CfnCluster:
    """The AWS::SageMaker::Cluster (id ``Resource`` under `scope`) of the instance groups in the VPC, whatever
    orchestrates it: the role may read the lifecycle, and the cluster waits for its node inputs."""
    lifecycle.grant_read(role)
    lifecycle.grant_report(role)
    cluster = sagemaker.CfnCluster(
        scope,
        "Resource",
        cluster_name=cluster_name,
        instance_groups=[g.render(role_arn=role.role_arn, lifecycle=lifecycle) for g in instance_groups],
        orchestrator=orchestrator,
        node_recovery=node_recovery,
        node_provisioning_mode=node_provisioning_mode,
        vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
            subnets=[subnet_id(s) for s in subnets],
            security_group_ids=[security_group_id(g) for g in security_groups],
        ),
        tags=[CfnTag(key=k, value=v) for k, v in sorted((tags or {}).items())] or None,
    )
    for index, group in enumerate(instance_groups):
        override = group.storage_override(index)
        if override is not None:
            cluster.add_property_override(*override)
    wait_for_node_inputs(cluster, lifecycle=lifecycle, role=role)
    return cluster


class HyperPodCluster(Construct):
    """What every HyperPod cluster is, whatever orchestrates it: the AWS::SageMaker::Cluster (``cluster``, id
    ``Resource``) of the instance groups in our VPC, nodes running ``role``, lifecycle scripts from ``lifecycle``
    (granted to the role; the cluster waits for their deployment). The orchestrator's variants (Slurm here, EKS in its
    kind's folder) check their own groups and say their ``orchestrator``.

    :param cluster_name: HyperPod cluster name.
    :param instance_groups: unique names.
    :param subnets: VpcConfig.Subnets (ISubnet or ids); ``security_groups``: VpcConfig.SecurityGroupIds.
    :param node_recovery: Automatic (default: HyperPod reboots or replaces faulty nodes) | None.
    :param node_provisioning_mode: Continuous, or None (HyperPod's default).
    :param tags: cluster tags.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        instance_groups: Sequence[HyperPodInstanceGroup],
        role: HyperPodInstanceRole,
        lifecycle: LifecycleScripts,
        subnets: Sequence[SubnetRef],
        security_groups: Sequence[SecurityGroupRef],
        orchestrator: sagemaker.CfnCluster.OrchestratorProperty,
        node_recovery: str = "Automatic",
        node_provisioning_mode: Optional[str] = None,
        tags: Optional[Dict[str, str]] = None,
    ) -> None:
        super().__init__(scope, id)
        check_cluster_props(cluster_name=cluster_name, instance_groups=instance_groups, node_recovery=node_recovery,
                            subnets=subnets, security_groups=security_groups)
        self._cluster_name = cluster_name
        self.instance_groups = tuple(instance_groups)
        self.cluster = cfn_cluster(
            self, cluster_name=cluster_name, instance_groups=instance_groups, role=role, lifecycle=lifecycle,
            orchestrator=orchestrator, node_recovery=node_recovery, subnets=subnets, security_groups=security_groups,
            node_provisioning_mode=node_provisioning_mode, tags=tags,
        )

    @property
    def cluster_arn(self) -> str:
        return self.cluster.attr_cluster_arn

    @property
    def cluster_name(self) -> str:
        return self._cluster_name

    @property
    def cluster_id(self) -> str:
        """The id in the cluster ARN (``arn:...:cluster/<id>``), as a token."""
        return Fn.select(1, Fn.split("/", self.cluster_arn))

    def ssm_target(self, group: str, instance_id: str) -> str:
        """``sagemaker-cluster:<cluster-id>_<group>-<instance-id>``, the SSM Session Manager
        target of one node (e.g. for a CfnOutput of the controller's target prefix, pass
        ``instance_id=""`` and append the id from ``aws sagemaker list-cluster-nodes``)."""
        if group not in {g.name for g in self.instance_groups}:
            raise ValueError(f"group: no instance group {group!r}")
        return Fn.join("", ["sagemaker-cluster:", self.cluster_id, f"_{group}-{instance_id}"])


class HyperPodSlurmCluster(HyperPodCluster):
    """A HyperPod cluster orchestrated by Slurm (`HyperPodCluster`'s props, and):

    :param instance_groups: exactly one Controller group, any Login and Compute groups, unique names.
    :param slurm_config_strategy: Managed (default) | Overwrite | Merge.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        instance_groups: Sequence[HyperPodInstanceGroup],
        role: HyperPodInstanceRole,
        lifecycle: LifecycleScripts,
        subnets: Sequence[SubnetRef],
        security_groups: Sequence[SecurityGroupRef],
        node_recovery: str = "Automatic",
        slurm_config_strategy: str = "Managed",
    ) -> None:
        controllers = [g.name for g in instance_groups if g.node_type == "Controller"]
        if len(controllers) != 1:
            raise ValueError(f"instance_groups: a Slurm cluster needs exactly one Controller group, got "
                             f"{controllers or 'none'}")
        if not any(g.node_type == "Compute" for g in instance_groups):
            raise ValueError("instance_groups: a Slurm cluster needs at least one Compute group")
        if slurm_config_strategy not in SLURM_CONFIG_STRATEGIES:
            raise ValueError(f"slurm_config_strategy: must be one of {', '.join(SLURM_CONFIG_STRATEGIES)}")
        super().__init__(
            scope, id, cluster_name=cluster_name, instance_groups=instance_groups, role=role, lifecycle=lifecycle,
            subnets=subnets, security_groups=security_groups, node_recovery=node_recovery,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                slurm=sagemaker.CfnCluster.ClusterOrchestratorSlurmConfigProperty(
                    slurm_config_strategy=slurm_config_strategy)),
        )

    @property
    def controller_group(self) -> str:
        return next(g.name for g in self.instance_groups if g.node_type == "Controller")

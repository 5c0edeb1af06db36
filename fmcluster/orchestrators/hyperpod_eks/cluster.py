"""SageMaker HyperPod orchestrated by an EKS cluster (AWS::SageMaker::Cluster with Orchestrator.Eks), as a typed
wrapper over ``aws_sagemaker.CfnCluster`` built from the hyperpod kind's instance groups, instance role and lifecycle.

Facts used (CloudFormation resource schema as bundled with cfn-lint 1.58; API reference):
- ``Orchestrator.Eks.ClusterArn`` names the EKS cluster; it, ``ClusterName`` and ``VpcConfig`` are create-only (a
  change replaces the HyperPod cluster).
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-sagemaker-cluster-orchestrator.html
- ``NodeProvisioningMode: Continuous`` (the only value; HyperPod retries failed launches and brings up the instances it
  can while the cluster stays InService); ``NodeRecovery: Automatic | None``.
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sagemaker-cluster.html
- instance groups: ``KubernetesConfig {Labels, Taints}`` (no custom taints on groups with deep health checks: SageMaker
  guide, "Getting started with Amazon EKS support in SageMaker HyperPod"); no ``SlurmConfig``.
- HyperPod creates the EKS access entries of its execution roles and of its service-linked role itself
  (API ClusterMetadata.EksRoleAccessEntries, SlrAccessEntry), so fmcluster creates none for the instance role.
  https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterMetadata.html
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from fmcluster.platforms.hyperpod.cluster import HyperPodCluster, HyperPodInstanceGroup
from fmcluster.platforms.hyperpod.instance_role import (
    HyperPodInstanceRole,
    SecurityGroupRef,
    SubnetRef,
)
from fmcluster.platforms.hyperpod.lifecycle import LifecycleScripts
from fmcluster.spec.checkpoints import MANAGED_MEMORY_PERCENT


class HyperPodEksCluster(HyperPodCluster):
    """A HyperPod cluster whose nodes join `eks_cluster_arn` (`HyperPodCluster`'s props, and):

    :param eks_cluster_arn: the EKS cluster's ARN.
    :param instance_groups: groups without a Slurm node type; at least one.
    :param continuous_provisioning: NodeProvisioningMode Continuous (default on).
    :param autoscaling_role_arn: turns on HyperPod's autoscaling (``AutoScaling`` Karpenter, with this role as
        ``ClusterRole``), which is built on continuous provisioning.
    :param checkpoint_memory_percent: managed tiered checkpointing on, with this share (20-100) of every node's memory
        for checkpoints (TieredStorageConfig); None: off.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        eks_cluster_arn: str,
        instance_groups: Sequence[HyperPodInstanceGroup],
        role: HyperPodInstanceRole,
        lifecycle: LifecycleScripts,
        subnets: Sequence[SubnetRef],
        security_groups: Sequence[SecurityGroupRef],
        node_recovery: str = "Automatic",
        continuous_provisioning: bool = True,
        autoscaling_role_arn: Optional[str] = None,
        tags: Optional[Dict[str, str]] = None,
        checkpoint_memory_percent: Optional[int] = None,
    ) -> None:
        if not instance_groups:
            raise ValueError("instance_groups: at least one")
        if autoscaling_role_arn is not None and not continuous_provisioning:
            raise ValueError("autoscaling_role_arn: HyperPod's autoscaling requires continuous provisioning")
        for group in instance_groups:
            if group.node_type is not None or group.partitions:
                raise ValueError(f"instance_groups[{group.name!r}].node_type: EKS instance groups have no Slurm role")
        if checkpoint_memory_percent is not None:
            low, high = MANAGED_MEMORY_PERCENT
            if not low <= checkpoint_memory_percent <= high:
                raise ValueError(f"checkpoint_memory_percent: {checkpoint_memory_percent} is not {low}-{high}")
        super().__init__(
            scope, id, cluster_name=cluster_name, instance_groups=instance_groups, role=role, lifecycle=lifecycle,
            subnets=subnets, security_groups=security_groups, node_recovery=node_recovery, tags=tags,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=eks_cluster_arn)),
            node_provisioning_mode="Continuous" if continuous_provisioning else None,
        )
        if checkpoint_memory_percent is not None:
            # HyperPod installs its memory management daemon on every node (SageMaker API reference,
            # ClusterTieredStorageConfig); an update needs no interruption (CloudFormation TieredStorageConfig).
            self.cluster.tiered_storage_config = sagemaker.CfnCluster.TieredStorageConfigProperty(
                mode="Enable", instance_memory_allocation_percentage=checkpoint_memory_percent)
        if autoscaling_role_arn is not None:
            self.cluster.auto_scaling = sagemaker.CfnCluster.ClusterAutoScalingConfigProperty(
                mode="Enable", auto_scaler_type="Karpenter")
            self.cluster.cluster_role = autoscaling_role_arn

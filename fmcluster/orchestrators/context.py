"""What the cluster stack hands a kind's `bind` (`OrchestrationContext`), and what it gets back (`Orchestration`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.node_group import Ec2NodeGroup
from fmcluster.platforms.ec2.node_builder import NodeGroupBuilder
from fmcluster.platforms.storage import Mounts
from fmcluster.spec import ClusterSpec

__all__ = ["Orchestration", "OrchestrationContext"]


@dataclass
class OrchestrationContext:
    """Everything a kind's construct builds from.

    :param spec: the validated spec.
    :param subnets: the node subnet(s), in the GPU AZ (kinds that launch into one take the first).
    :param security_groups: the EFA security group (the only group on every node interface).
    :param node_builder: builds EC2 node groups (placement group + EFA launch template + user data).
    :param mounts: every shared store the spec configures, as kinds mount it (the storage contract,
        `fmcluster.platforms.storage`), with the registered stores' declarations; empty without a storage stack.
    :param remote_write_url: the AMP remote-write URL, or None without observability.
    :param instance_tags: tags for the instances the kind launches (launch templates do not pass stack tags on).
    :param grant_remote_write: grants AMP remote write to a principal the kind builds beside its ``grantee`` (a
        head node or controller that runs collectors); None without observability.
    :param extra_subnets: the second-AZ private subnet(s): the network stack's, or `existing_vpc.extra_subnet_ids`.
    :param vpc: the VPC (for constructs that take one, such as an EKS cluster).
    :param metrics_workspace_arn: the AMP workspace's ARN, or None without observability (for a managed scraper).
    :param data_bucket_arn: the data bucket's ARN, for a kind that grants a principal of its own part of it (the
        cluster stack grants ``grantee`` the whole bucket); None where the stack has no storage stack.
    :param data_key_arn: the data bucket's KMS key, or None for an existing bucket (its own key applies).
    """

    spec: ClusterSpec
    subnets: List[ec2.ISubnet]
    security_groups: List[ec2.ISecurityGroup]
    node_builder: NodeGroupBuilder
    mounts: Mounts = field(default_factory=Mounts)
    remote_write_url: Optional[str] = None
    instance_tags: Dict[str, str] = field(default_factory=dict)
    grant_remote_write: Optional[Callable[[iam.IGrantable], iam.Grant]] = None
    extra_subnets: List[ec2.ISubnet] = field(default_factory=list)
    vpc: Optional[ec2.IVpc] = None
    metrics_workspace_arn: Optional[str] = None
    data_bucket_arn: Optional[str] = None
    data_key_arn: Optional[str] = None

    @property
    def subnet_ids(self) -> List[str]:
        return [s.subnet_id for s in self.subnets]

    @property
    def security_group_ids(self) -> List[str]:
        return [g.security_group_id for g in self.security_groups]


@dataclass(frozen=True)
class Orchestration:
    """What a kind's `bind` returns to the cluster stack.

    :param construct: the kind's construct (tests and other constructs reach what it exposes through it).
    :param grantee: the principal the workloads run as (the nodes' role, or on EKS the training pods' Pod Identity
        role); the storage and observability stacks grant to it.
    :param ec2_node_groups: the EC2 node groups it launched from fmcluster's launch templates, by spec group name;
        the stack outputs each one's launch template and placement group.
    :param node_principal: the principal the nodes themselves run as, where it is not ``grantee`` (EKS: the node role,
        its pods running as ``grantee``): what the nodes mount, they mount as it, so the stores' node permissions
        (`Mount.node_permissions`) go to it.
    """

    construct: Construct
    grantee: iam.IGrantable
    ec2_node_groups: Mapping[str, Ec2NodeGroup] = field(default_factory=dict)
    node_principal: Optional[iam.IGrantable] = None

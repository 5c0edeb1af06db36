"""What the cluster stack hands an orchestrator kind's construct: one context object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam

from fmcluster.orchestrators.kind import OrchestratorKind
from fmcluster.spec import ClusterSpec

if TYPE_CHECKING:
    from fmcluster.orchestrators.ec2_nodes import Ec2NodeGroups


@dataclass(frozen=True)
class SharedFileSystem:
    """The storage stack's FSx for Lustre file system, as nodes mount it (``file_system_id`` for orchestrators that
    mount it themselves, by id)."""

    dns_name: str
    mount_name: str
    mount_point: str
    efa: bool
    file_system_id: Optional[str] = None  # what a Kubernetes PersistentVolume names (volumeHandle)

    def parameters(self) -> Dict[str, Any]:
        return {"dns_name": self.dns_name, "mount_name": self.mount_name, "mount_point": self.mount_point,
                "efa": self.efa}


@dataclass
class OrchestrationContext:
    """Everything a kind's construct builds from.

    :param spec: the validated spec.
    :param kind: the kind being built.
    :param subnets: the node subnet(s), in the GPU AZ (kinds that launch into one take the first).
    :param security_groups: the EFA security group (the only group on every node interface).
    :param file_system: the shared file system, or None.
    :param remote_write_url: the AMP remote-write URL, or None without observability.
    :param node_groups: builds EC2 node groups (placement group + EFA launch template + user data).
    :param grant_remote_write: grants AMP remote write to a principal the kind builds beside its ``grantee`` (a
        head node or controller that runs collectors); None without observability.
    :param extra_subnets: private subnets in the other AZs the kind asked for (`OrchestratorKind.extra_availability_zones`).
    :param vpc: the VPC (for constructs that take one, such as an EKS cluster).
    :param metrics_workspace_arn: the AMP workspace's ARN, or None without observability (for a managed scraper).
    """

    spec: ClusterSpec
    kind: OrchestratorKind
    subnets: List[ec2.ISubnet]
    security_groups: List[ec2.ISecurityGroup]
    node_groups: Ec2NodeGroups
    file_system: Optional[SharedFileSystem] = None
    remote_write_url: Optional[str] = None
    instance_tags: Dict[str, str] = field(default_factory=dict)
    grant_remote_write: Optional[Callable[[iam.IGrantable], iam.Grant]] = None
    extra_subnets: List[ec2.ISubnet] = field(default_factory=list)
    vpc: Optional[ec2.IVpc] = None
    metrics_workspace_arn: Optional[str] = None

    @property
    def subnet_ids(self) -> List[str]:
        return [s.subnet_id for s in self.subnets]

    @property
    def security_group_ids(self) -> List[str]:
        return [g.security_group_id for g in self.security_groups]


class Orchestration(Protocol):
    """What the cluster stack needs back from a kind's construct: the principal the nodes run as, which the
    storage and observability stacks grant to."""

    @property
    def grantee(self) -> iam.IGrantable: ...

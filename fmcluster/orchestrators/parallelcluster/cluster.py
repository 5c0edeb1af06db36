"""A ParallelCluster cluster as a CloudFormation resource: `Custom::PclusterCluster`, served by the provider's
Lambda (https://docs.aws.amazon.com/parallelcluster/latest/ug/cfn-cluster-resource.html).

The configuration is passed as an object, never as a YAML string: CloudFormation resolves the references in it
(subnet, security group, file system, policies, scripts) before the Lambda reads it, and the Lambda adds the
stack's tags to it as a mapping."""

from __future__ import annotations

import re
from typing import Any, Mapping

from aws_cdk import CustomResource, Token
from constructs import Construct

from fmcluster.orchestrators.parallelcluster.settings import CLUSTER_NAME_PATTERN

RESOURCE_TYPE = "Custom::PclusterCluster"
DELETION_POLICIES = ("Delete", "Retain")
REQUIRED_SECTIONS = ("HeadNode", "Image", "Scheduling")


class PclusterCluster(Construct):
    """One ParallelCluster cluster.

    :param service_token: the provider's ServiceToken (`ParallelClusterProvider.service_token`).
    :param cluster_name: the cluster's name; ParallelCluster names its own stack after it, so it must differ from
        the stack this resource is in. It cannot change after creation (the provider refuses the update).
    :param configuration: the cluster configuration as a mapping (ParallelCluster's keys; references allowed).
    :param deletion_policy: the provider's ``DeletionPolicy`` property: Delete (the cluster goes with the
        resource) or Retain (it stays, outside CloudFormation).

    Exposes ``resource``, ``cluster_name``, ``validation_messages`` and `attribute`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        service_token: str,
        cluster_name: str,
        configuration: Mapping[str, Any],
        deletion_policy: str = "Delete",
    ) -> None:
        super().__init__(scope, id)
        if not Token.is_unresolved(cluster_name) and not re.match(CLUSTER_NAME_PATTERN, cluster_name):
            raise ValueError(f"cluster_name: {cluster_name!r} must match {CLUSTER_NAME_PATTERN}")
        if deletion_policy not in DELETION_POLICIES:
            raise ValueError(f"deletion_policy: {deletion_policy!r} is not one of {', '.join(DELETION_POLICIES)}")
        if isinstance(configuration, str) or not isinstance(configuration, Mapping):
            raise ValueError("configuration: a mapping (the provider reads an object, not a YAML string)")
        missing = [k for k in REQUIRED_SECTIONS if k not in configuration]
        if missing:
            raise ValueError(f"configuration: missing {', '.join(missing)}")
        self.cluster_name = cluster_name
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=service_token,
            resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": cluster_name,
                "ClusterConfiguration": dict(configuration),
                "DeletionPolicy": deletion_policy,
            },
        )

    def attribute(self, name: str) -> str:
        """A value of the cluster (describe-cluster output, flattened with dots: ``headNode.instanceId``)."""
        return self.resource.get_att_string(name)

    @property
    def validation_messages(self) -> str:
        """JSON list of the last create or update's validation messages ({id, type, level, message})."""
        return self.resource.get_att_string("validationMessages")

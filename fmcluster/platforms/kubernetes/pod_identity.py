"""A workload's AWS credentials through EKS Pod Identity: the association that hands a Pod Identity role (made by
`EksControlPlane.pod_identity_role`) to one Kubernetes service account, and that service account as an object.

An association lives in the EKS API only: "There isn't any data or metadata about the associations inside the
cluster in any Kubernetes objects" (EKS user guide, "Assign an IAM role to a Kubernetes service account",
https://docs.aws.amazon.com/eks/latest/userguide/pod-id-association.html), so it can be created before its namespace
and service account exist; pods that run as the service account get the role's credentials from the Pod Identity
agent on their node (the `eks-pod-identity-agent` add-on, `control_plane.add_standard_addons`)."""

from __future__ import annotations

from typing import Any, Dict

from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_iam as iam
from constructs import Construct


def associate(scope: Construct, id: str, *, cluster_name: str, namespace: str, service_account: str,
              role: iam.IRole) -> eks_l1.CfnPodIdentityAssociation:
    """AWS::EKS::PodIdentityAssociation: pods of `namespace` running as `service_account` get `role`."""
    return eks_l1.CfnPodIdentityAssociation(scope, id, cluster_name=cluster_name, namespace=namespace,
                                            service_account=service_account, role_arn=role.role_arn)


def service_account(name: str, namespace: str) -> Dict[str, Any]:
    """The ServiceAccount object pods name in `serviceAccountName` (a pod naming a missing one is refused)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}

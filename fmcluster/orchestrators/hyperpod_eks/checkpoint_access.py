"""What training pods need for HyperPod managed tiered checkpointing (`checkpoints.tier: managed`): a Pod Identity role
that may read and write the checkpoint prefix of the data bucket and put CloudWatch metrics, bound to the service
account ``fmcluster-checkpoints`` in every task-governance team namespace (docs/checkpoints.md, "The managed tier").

The setup guide's prerequisite: "Amazon CloudWatch and Amazon S3 write permissions for the training pod to read/write
checkpoints and push metrics" (https://docs.aws.amazon.com/sagemaker/latest/dg/managed-tier-checkpointing-setup.html).
The S3 actions are the calls the amzn-sagemaker-checkpointing library makes (its S3 tier): GetBucketLocation on the
bucket of s3_tier_base_path, ListObjectsV2 under <base>/<namespace>/rank_<n>/ to find the newest complete step, and
object reads and writes through s3torchconnector's S3Checkpoint (multipart uploads: CreateMultipartUpload, UploadPart
and CompleteMultipartUpload are authorized by s3:PutObject, AbortMultipartUpload by its own action; Amazon S3 user
guide, "Multipart upload API and permissions"). Nothing is deleted: old checkpoints leave through the bucket's
lifecycle rules, so a pod cannot lose the run's history."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.bucket_deployment import nag_resource
from fmcluster.nag import acknowledge
from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.orchestrators.hyperpod_eks.settings import HyperPodEksOrchestrator
from fmcluster.platforms.ec2.node_builder import construct_id
from fmcluster.platforms.kubernetes import pod_identity
from fmcluster.platforms.kubernetes.cluster import EksControlPlane
from fmcluster.spec import ClusterSpec

SERVICE_ACCOUNT = "fmcluster-checkpoints"
OBJECT_ACTIONS = ("s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject")
# SSE-KMS: a write needs GenerateDataKey, a read and a multipart upload's completion Decrypt (Amazon S3 user guide,
# "Using server-side encryption with AWS KMS keys", permissions).
KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
# PutMetricData supports no resource-level permissions (Service Authorization Reference, Amazon CloudWatch); the
# guide names no metric namespace, so none is pinned (docs/checkpoints.md).
METRICS_ACTION = "cloudwatch:PutMetricData"


def checkpoint_prefix(directory: str) -> str:
    """The data bucket prefix of `checkpoints.directory` (``/checkpoints`` -> ``checkpoints/``)."""
    return directory.strip("/") + "/"


def policy_statements(*, region: str, bucket_arn: str, key_arn: Optional[str], prefix: str) -> List[iam.PolicyStatement]:
    """The role's permissions: `prefix` of the bucket, the bucket's key through S3 only, CloudWatch metrics."""
    statements = [
        iam.PolicyStatement(sid="CheckpointObjects", actions=list(OBJECT_ACTIONS), resources=[f"{bucket_arn}/{prefix}*"]),
        iam.PolicyStatement(sid="CheckpointListing", actions=["s3:ListBucket"], resources=[bucket_arn],
                            conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}}),
        iam.PolicyStatement(sid="CheckpointBucketRegion", actions=["s3:GetBucketLocation"], resources=[bucket_arn]),
        iam.PolicyStatement(sid="CheckpointMetrics", actions=[METRICS_ACTION], resources=["*"]),
    ]
    if key_arn is not None:
        statements.append(iam.PolicyStatement(
            sid="CheckpointKey", actions=list(KEY_ACTIONS), resources=[key_arn],
            conditions={"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}))
    return statements


class CheckpointAccess(Construct):
    """The training pods' Pod Identity role for managed tiered checkpointing and its associations.

    :param control_plane: the EKS control plane (it makes the role; its Pod Identity agent serves the credentials).
    :param cluster_name: the EKS cluster's name (a reference to it, so the associations follow the cluster).
    :param namespaces: the namespaces whose ``fmcluster-checkpoints`` service account gets the role.
    :param bucket_arn: the data bucket; ``key_arn``: its KMS key, or None (an existing bucket's key is not granted).
    :param prefix: the checkpoint prefix in the bucket (`checkpoint_prefix`).

    Exposes ``role``, ``associations`` (namespace -> AWS::EKS::PodIdentityAssociation) and ``service_account`` (its
    name; the objects: `service_accounts`).
    """

    def __init__(self, scope: Construct, id: str, *, control_plane: EksControlPlane, cluster_name: str,
                 namespaces: Sequence[str], bucket_arn: str, key_arn: Optional[str], prefix: str) -> None:
        super().__init__(scope, id)
        if not namespaces:
            raise ValueError("namespaces: at least one")
        stack = Stack.of(self)
        self.service_account = SERVICE_ACCOUNT
        self.role = control_plane.pod_identity_role(
            "CheckpointRole", f"managed tiered checkpointing ({SERVICE_ACCOUNT} in the team namespaces)",
            policy_statements(region=stack.region, bucket_arn=bucket_arn, key_arn=key_arn, prefix=prefix))
        acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{_nag(stack, bucket_arn)}/{prefix}*]",
                    "Checkpoint shards are written under the spec's checkpoint prefix with keys the library names "
                    "per job, rank and step; the object actions are named (get, put, abort an upload; no delete).")
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]",
                    "cloudwatch:PutMetricData supports no resource-level permissions (Service Authorization "
                    "Reference); it is the only action on '*'.")
        self.associations: Dict[str, eks_l1.CfnPodIdentityAssociation] = {
            ns: pod_identity.associate(self, f"{construct_id(ns)}PodIdentity", cluster_name=cluster_name,
                                       namespace=ns, service_account=SERVICE_ACCOUNT, role=self.role)
            for ns in namespaces}
        CfnOutput(self, "RoleArn", value=self.role.role_arn,
                  description="Pod Identity role of managed tiered checkpointing (docs/checkpoints.md)")
        CfnOutput(self, "ServiceAccount", value=SERVICE_ACCOUNT,
                  description="serviceAccountName of checkpointing pods in every team namespace (hyperpod-ns-<team>)")



def namespaces(spec: ClusterSpec) -> List[str]:
    """The namespaces whose pods checkpoint to the managed tier: every team's with `checkpoints.tier: managed`, else
    none."""
    if spec.checkpoints is None or spec.checkpoints.tier != "managed":
        return []
    return [t.namespace for t in HyperPodEksOrchestrator.of(spec).task_governance.teams]


def service_accounts(spec: ClusterSpec) -> List[Dict[str, Any]]:
    """The ServiceAccount ``fmcluster-checkpoints`` in each of `namespaces(spec)`, as the team-objects Deployment
    creates it once the namespace exists (the stack never waits for a team's namespace)."""
    return [pod_identity.service_account(SERVICE_ACCOUNT, ns) for ns in namespaces(spec)]


def for_spec(scope: Construct, *, context: OrchestrationContext, control_plane: EksControlPlane,
             cluster_name: str) -> Optional[CheckpointAccess]:
    """The spec's checkpoint access: with `checkpoints.tier: managed`, for every team's namespace; else None."""
    spec = context.spec
    teams = namespaces(spec)
    if not teams or spec.checkpoints is None:
        return None
    if context.data_bucket_arn is None:
        raise ValueError("context: managed tiered checkpointing persists to the data bucket (context.data_bucket_arn)")
    return CheckpointAccess(scope, "Checkpoints", control_plane=control_plane, cluster_name=cluster_name,
                            namespaces=teams, bucket_arn=context.data_bucket_arn, key_arn=context.data_key_arn,
                            prefix=checkpoint_prefix(spec.checkpoints.directory))


def _nag(stack: Stack, value: str) -> str:
    """`value` as cdk-nag prints it: an imported export by its name, anything else as `nag_resource` renders it."""
    resolved = stack.resolve(value)
    if isinstance(resolved, dict) and "Fn::ImportValue" in resolved:
        return str(resolved["Fn::ImportValue"])
    return nag_resource(stack, value)

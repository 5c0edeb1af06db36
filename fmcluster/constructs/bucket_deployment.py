"""Building blocks for a bucket a stack owns and fills at deploy time with CDK's ``aws_s3_deployment``
(`BucketDeployment`): the secure bucket, the explicit-action bucket policy that CDK's auto-delete needs here, the
deployment handler's role and log group (one per stack, as the handler is one singleton function per stack), and
the cdk-nag helpers the deploying constructs acknowledge their findings with.

Used by the SageMaker HyperPod lifecycle bucket and the ParallelCluster node assets bucket."""

from __future__ import annotations

from typing import Any, List, cast

import jsii
from aws_cdk import Duration, IResolvable, IResolveContext, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from fmcluster.constructs.kms import ClusterKey, logs_key_conditions
from fmcluster.nag import acknowledge, cfn_lint_ignore, nag_resource

# What CDK's auto-delete-objects handler calls (custom-resource-handlers/.../auto-delete-objects-handler
# in aws-cdk-lib 2.275: GetBucketTagging, GetBucketPolicy, PutBucketPolicy, ListObjectVersions,
# DeleteObjects with version ids). CDK grants them as s3:GetBucket*, s3:List*, s3:DeleteObject*;
# the project allows no wildcard actions, so the bucket policy names them.
AUTO_DELETE_EXPLICIT = {
    "s3:GetBucket*": ("s3:GetBucketPolicy", "s3:GetBucketTagging"),
    "s3:List*": ("s3:ListBucket", "s3:ListBucketVersions"),
    "s3:DeleteObject*": ("s3:DeleteObject", "s3:DeleteObjectVersion"),
}

# What the BucketDeployment handler (aws s3 sync --delete into the prefix) needs on the
# destination, and on the CDK asset bucket (download of the source zips).
DEPLOY_DESTINATION_OBJECT_ACTIONS = ("s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject")
DEPLOY_DESTINATION_BUCKET_ACTIONS = ("s3:GetBucketLocation", "s3:ListBucket")
HANDLER_ROLE_MARKER = "FmclusterBucketDeploymentRoleMarker"


@jsii.implements(IResolvable)
class ExplicitActions:
    """Renders a bucket policy document with CDK's wildcard actions replaced by the explicit
    actions they stand for (see AUTO_DELETE_EXPLICIT)."""

    def __init__(self, stack: Stack, document: iam.PolicyDocument) -> None:
        self._stack = stack
        self._document = document

    @property
    def creation_stack(self) -> List[str]:
        return []

    def to_string(self) -> str:
        return "${Token[fmcluster.ExplicitActions]}"

    def resolve(self, context: IResolveContext) -> Any:
        doc = self._stack.resolve(self._document)
        for statement in doc.get("Statement", []):
            actions = statement.get("Action")
            listed = [actions] if isinstance(actions, str) else list(actions or [])
            if any(a in AUTO_DELETE_EXPLICIT for a in listed):
                explicit: List[str] = []
                for a in listed:
                    explicit.extend(AUTO_DELETE_EXPLICIT.get(a, (a,)))
                statement["Action"] = sorted(set(explicit))
        return doc


def secure_bucket(scope: Construct, id: str, **kwargs: Any) -> s3.Bucket:
    """Public access blocked, SSE-S3, TLS-only bucket policy, ACLs disabled; `kwargs` add to that."""
    return s3.Bucket(
        scope,
        id,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        **kwargs,
    )


def server_access_log_bucket(scope: Construct, id: str, *, logged: str, retention: Duration = Duration.days(365)) -> s3.Bucket:
    """The destination of a bucket's S3 server access logs: a secure bucket kept when its stack goes (the logs are the
    audit trail of who read the logged bucket), each log object expiring after `retention`. `logged` names the bucket
    it serves, for the cdk-nag acknowledgment."""
    bucket = secure_bucket(scope, id, removal_policy=RemovalPolicy.RETAIN,
                           lifecycle_rules=[s3.LifecycleRule(expiration=retention)])
    acknowledge(bucket, "AwsSolutions-S1",
                f"This bucket is the destination of the {logged}'s server access logs; logging it to itself would loop.")
    return bucket


def explicit_bucket_policy(bucket: s3.Bucket) -> None:
    """Render `bucket`'s policy with named actions instead of the wildcards CDK's auto-delete grants."""
    policy = bucket.policy
    if policy is None:  # enforce_ssl gives every secure_bucket a policy
        raise TypeError(f"{bucket.node.path} has no bucket policy")
    cfn_policy = cast(s3.CfnBucketPolicy, policy.node.default_child)
    cfn_policy.add_property_override("PolicyDocument", ExplicitActions(Stack.of(bucket), policy.document))


def deployment_log_group(stack: Stack, id: str, *, description: str) -> logs.LogGroup:
    """One log group per stack for the BucketDeployment handler (a singleton function), encrypted with a customer
    managed key like every other log group of the cluster."""
    existing = stack.node.try_find_child(id)
    if isinstance(existing, logs.LogGroup):
        return existing
    key = ClusterKey(
        stack,
        f"{id}Key",
        description=description,
        service_principals={f"logs.{stack.region}.amazonaws.com": logs_key_conditions(stack.region, stack.account)},
    )
    return logs.LogGroup(stack, id, retention=logs.RetentionDays.ONE_MONTH, encryption_key=key.key,
                         removal_policy=RemovalPolicy.DESTROY)


def deployment_role(stack: Stack, id: str, *, description: str, log_group: logs.LogGroup) -> iam.Role:
    """The role of CDK's BucketDeployment handler. The handler is one singleton Lambda per stack, so its role is one
    per stack too; each deploying construct adds its own destination (`grant_destination`)."""
    existing = stack.node.try_find_child(id)
    if isinstance(existing, iam.Role):
        return existing
    # the singleton handler runs with the first deployment's role, so a second role would never be used
    other = stack.node.try_find_child(HANDLER_ROLE_MARKER)
    if other is not None:
        raise ValueError(f"{stack.node.path} already has a BucketDeployment role; deploying constructs in one stack "
                         f"must share it (id {id} asked for another)")
    Construct(stack, HANDLER_ROLE_MARKER)  # no resource: marks that this stack's handler role exists
    role = iam.Role(stack, id, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description)
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[f"{log_group.log_group_arn}:log-stream:*"]
        )
    )
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{asset_bucket_arn(stack)}/*"]))
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{nag_resource(stack, asset_bucket_arn(stack))}/*]",
        "CDK BucketDeployment handler reads the source zips (content-addressed keys) from the CDK bootstrap asset bucket; "
        "only s3:GetObject, only that bucket.",
    )
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{nag_resource(stack, log_group.log_group_arn)}:log-stream:*]",
        "CDK BucketDeployment handler writes log streams (created per Lambda instance) in its own log group only.",
    )
    return role


def grant_destination(role: iam.Role, bucket: s3.IBucket, prefix: str) -> None:
    """What the handler needs to sync into `prefix` of `bucket`: named object actions under the prefix, location
    and listing on the bucket (the deployment itself gets the role without policy updates)."""
    stack = Stack.of(bucket)
    role.add_to_policy(
        iam.PolicyStatement(actions=list(DEPLOY_DESTINATION_OBJECT_ACTIONS), resources=[bucket.arn_for_objects(f"{prefix}*")])
    )
    role.add_to_policy(iam.PolicyStatement(actions=list(DEPLOY_DESTINATION_BUCKET_ACTIONS), resources=[bucket.bucket_arn]))
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{nag_resource(stack, bucket.arn_for_objects(f'{prefix}*'))}]",
        f"CDK BucketDeployment handler syncs (put/delete) the synthesized files under this bucket's {prefix} prefix; "
        "their keys are only known at deploy time. Actions are named: GetObject, PutObject, DeleteObject, "
        "AbortMultipartUpload.",
    )


def grant_node_reports(grantee: iam.IGrantable, bucket: s3.IBucket, prefixes: List[str], *, bucket_role: str
                       ) -> iam.Grant:
    """s3:PutObject under each node-report prefix (``.../node-reports/<group>/``): a node writes its own report there
    (runtime/node_report.py); no read, list or delete. `bucket_role` names the bucket in the acknowledgment."""
    arns = [bucket.arn_for_objects(f"{prefix}*") for prefix in prefixes]
    grant = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:PutObject"], resource_arns=arns)
    if isinstance(grantee, Construct):
        for arn in arns:
            acknowledge(grantee, f"AwsSolutions-IAM5[Resource::{nag_resource(Stack.of(bucket), arn)}]",
                        "A node writes its own node report (instance id, runtime digest, verdict) under its group's "
                        f"node-reports/ prefix of {bucket_role}: s3:PutObject only.")
    return grant


def acknowledge_deployment_handler(stack: Stack) -> None:
    for child in stack.node.children:
        if child.node.id.startswith("Custom::CDKBucketDeployment"):
            acknowledge(
                child,
                "AwsSolutions-L1",
                "CDK's BucketDeployment handler: aws-cdk-lib pins its Python runtime (it bundles the AWS CLI layer for that "
                "runtime); it runs only during deployments and moves forward with aws-cdk-lib upgrades.",
            )
            cfn_lint_ignore(
                child,
                ["W3005"],
                "CDK's BucketDeployment handler declares DependsOn on its role (and policy) as well as a GetAtt; harmless",
            )


def asset_bucket_arn(stack: Stack) -> str:
    bucket_name = getattr(stack.synthesizer, "bucket_name", None)
    if not isinstance(bucket_name, str):
        bucket_name = f"cdk-*-assets-{stack.account}-{stack.region}"
    return f"arn:{stack.partition}:s3:::{bucket_name}"

"""The HyperPod lifecycle bucket: an S3 bucket named ``sagemaker-...`` holding the synthesized
lifecycle scripts, the provisioning parameters, the per-group NodeProfiles and the fmcluster
runtime, deployed with ``aws_s3_deployment.BucketDeployment``.

Layout under ``s3://<bucket>/lifecycle/`` (HyperPod's ``SourceS3Uri``)::

    on_init_complete.sh                  stub that execs pkg/fmcluster/runtime/lifecycle/on_init_complete.sh
    fmcluster_parameters.json  from the caller's dict (CDK tokens allowed)
    profiles/<group>.json         NodeProfile per instance group
    pkg/fmcluster/runtime/...     the fmcluster/runtime directory

The bucket holds nothing but what synthesis produced, so it is DESTROYed with the cluster
stack (auto-delete empties it first); a redeploy recreates every object.
"""

from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional, cast

import jsii
from aws_cdk import Duration, IResolvable, IResolveContext, RemovalPolicy, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from fmcluster.constructs.kms import ClusterKey, logs_key_conditions
from fmcluster.constructs.node_bootstrap import RUNTIME_DIR
from fmcluster.nag import acknowledge, cfn_lint_ignore

PREFIX = "lifecycle/"
RUNTIME_PREFIX = f"{PREFIX}pkg/fmcluster/runtime/"
ENTRY_SCRIPT = "on_init_complete.sh"
ENTRY_STUB = '#!/bin/bash\nexec bash "$(dirname "$0")/pkg/fmcluster/runtime/lifecycle/on_init_complete.sh" "$@"\n'
# Cluster names the spec allows; the bucket name embeds one, so it must be a valid bucket label.
CLUSTER_NAME = re.compile(r"^[a-z0-9](-*[a-z0-9])*$")
MAX_CLUSTER_NAME = 25

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


@jsii.implements(IResolvable)
class _ExplicitActions:
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


def _secure_bucket(scope: Construct, id: str, **kwargs: Any) -> s3.Bucket:
    return s3.Bucket(
        scope,
        id,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        **kwargs,
    )


class LifecycleScripts(Construct):
    """Lifecycle bucket + deployed scripts for one HyperPod cluster.

    :param cluster_name: the HyperPod cluster name (≤ 25 chars of ``[a-z0-9-]``); the bucket is
        ``sagemaker-<cluster>-<account>-<region>``: the ``sagemaker-`` prefix is what
        AmazonSageMakerClusterInstanceRolePolicy and the ``SourceS3Uri`` docs expect
        (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterLifeCycleConfig.html),
        and account + region make it globally unique without a fixed literal.
    :param parameters: written to ``lifecycle/fmcluster_parameters.json``; values may be tokens.
    :param profiles: instance group name → NodeProfile JSON text, written to ``lifecycle/profiles/<group>.json``.
    :param access_logs_bucket: where S3 server access logs go; default: a bucket created here
        (SSE-S3, TLS-only, retained, objects expire after ``access_logs_retention``).

    Encryption is SSE-S3, decided on purpose: the objects are synthesized scripts and
    non-secret parameters, and every HyperPod node reads them with its instance role; a KMS
    key would add a key grant to every instance role and to the deployment handler for no gain.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        parameters: Mapping[str, Any],
        profiles: Mapping[str, str],
        access_logs_bucket: Optional[s3.IBucket] = None,
        access_logs_retention: Duration = Duration.days(365),
    ) -> None:
        super().__init__(scope, id)
        if not Token.is_unresolved(cluster_name):
            if not (CLUSTER_NAME.match(cluster_name) and len(cluster_name) <= MAX_CLUSTER_NAME):
                raise ValueError(
                    f"cluster_name: {cluster_name!r}: the lifecycle bucket name embeds it, so it must be "
                    f"1-{MAX_CLUSTER_NAME} chars of a-z, 0-9 and '-', starting and ending alphanumeric"
                )
        stack = Stack.of(self)
        if not Token.is_unresolved(stack.region):
            length = len(f"sagemaker-{cluster_name}-123456789012-{stack.region}")
            if length > 63:
                raise ValueError(f"cluster_name: the lifecycle bucket name would be {length} chars (S3 allows 63); "
                                 "shorten it")
        if access_logs_bucket is None:
            access_logs_bucket = _secure_bucket(
                self,
                "AccessLogs",
                removal_policy=RemovalPolicy.RETAIN,
                lifecycle_rules=[s3.LifecycleRule(expiration=access_logs_retention)],
            )
            acknowledge(
                access_logs_bucket,
                "AwsSolutions-S1",
                "This bucket is the destination of the lifecycle bucket's server access logs; logging it to itself would loop.",
            )
        bucket_name = f"sagemaker-{cluster_name}-{stack.account}-{stack.region}"
        self.bucket_name = bucket_name
        self.bucket = _secure_bucket(
            self,
            "Bucket",
            bucket_name=bucket_name,
            versioned=True,
            removal_policy=RemovalPolicy.DESTROY,
            auto_delete_objects=True,
        )
        # Server access logs through a bucket policy on the log bucket (not the legacy
        # LogDeliveryWrite ACL CDK uses without the serverAccessLogsUseBucketPolicy flag).
        logs_prefix = f"{cluster_name}/"
        cfn_bucket = cast(s3.CfnBucket, self.bucket.node.default_child)
        cfn_bucket.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
            destination_bucket_name=access_logs_bucket.bucket_name, log_file_prefix=logs_prefix
        )
        granted = access_logs_bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid=f"ServerAccessLogsOf{cluster_name.replace('-', '')}",
                principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
                actions=["s3:PutObject"],
                resources=[access_logs_bucket.arn_for_objects(f"{logs_prefix}*")],
                conditions={
                    # the name, not a reference: the lifecycle bucket waits for this policy
                    "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:s3:::{bucket_name}"},
                    "StringEquals": {"aws:SourceAccount": stack.account},
                },
            )
        )
        if granted.policy_dependable is not None:
            cfn_bucket.node.add_dependency(granted.policy_dependable)
        policy = self.bucket.policy
        if policy is None:  # enforce_ssl gives every _secure_bucket a policy
            raise TypeError("the lifecycle bucket has no bucket policy")
        cfn_policy = cast(s3.CfnBucketPolicy, policy.node.default_child)
        cfn_policy.add_property_override("PolicyDocument", _ExplicitActions(stack, policy.document))

        role = _deployment_role(stack)
        files = [
            s3deploy.Source.data(ENTRY_SCRIPT, ENTRY_STUB),
            s3deploy.Source.json_data("fmcluster_parameters.json", dict(parameters)),
            *(s3deploy.Source.data(f"profiles/{group}.json", text) for group, text in sorted(profiles.items())),
        ]
        self.scripts = s3deploy.BucketDeployment(
            self,
            "Scripts",
            sources=files,
            destination_bucket=self.bucket,
            destination_key_prefix=PREFIX,
            # prune stale profiles, but never the runtime the other deployment owns
            exclude=["pkg/*"],
            role=role.without_policy_updates(),
            log_group=_deployment_log_group(stack),
        )
        self.runtime = s3deploy.BucketDeployment(
            self,
            "Runtime",
            sources=[s3deploy.Source.asset(str(RUNTIME_DIR), exclude=["__pycache__", "**/__pycache__", "*.pyc"])],
            destination_bucket=self.bucket,
            destination_key_prefix=RUNTIME_PREFIX,
            role=role.without_policy_updates(),
            log_group=_deployment_log_group(stack),
        )
        # The handler role is immutable for the deployments (CDK's grants use wildcard
        # actions); it gets these explicit ones instead.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=list(DEPLOY_DESTINATION_OBJECT_ACTIONS), resources=[self.bucket.arn_for_objects(f"{PREFIX}*")]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=list(DEPLOY_DESTINATION_BUCKET_ACTIONS), resources=[self.bucket.bucket_arn])
        )
        _acknowledge_deployment_handler(stack)
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{nag_resource(stack, self.bucket.arn_for_objects(f'{PREFIX}*'))}]",
            "CDK BucketDeployment handler syncs (put/delete) the synthesized files under this bucket's lifecycle/ prefix; "
            "their keys are only known at deploy time. Actions are named: GetObject, PutObject, DeleteObject, "
            "AbortMultipartUpload.",
        )

    @property
    def source_s3_uri(self) -> str:
        """``s3://<bucket>/lifecycle/`` — HyperPod's LifeCycleConfig.SourceS3Uri."""
        # the name as built (not a Ref), so the template shows the s3://sagemaker- prefix HyperPod requires
        return f"s3://{self.bucket_name}/{PREFIX}"

    @property
    def entry_script(self) -> str:
        """LifeCycleConfig.OnInitComplete: the entry script's name under ``source_s3_uri``."""
        return ENTRY_SCRIPT

    @property
    def deployments(self) -> List[s3deploy.BucketDeployment]:
        """What must finish before nodes boot (the cluster depends on these)."""
        return [self.scripts, self.runtime]

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """s3:GetObject under ``lifecycle/`` and s3:ListBucket limited to that prefix."""
        grant = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                           resource_arns=[self.bucket.arn_for_objects(f"{PREFIX}*")])
        grant = grant.combine(iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:ListBucket"],
            resource_arns=[self.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [PREFIX, f"{PREFIX}*"]}},
        ))
        if isinstance(grantee, Construct):
            acknowledge(
                grantee,
                f"AwsSolutions-IAM5[Resource::{nag_resource(Stack.of(self), self.bucket.arn_for_objects(f'{PREFIX}*'))}]",
                "Nodes read the lifecycle scripts, parameters, profiles and runtime under the lifecycle/ prefix of the "
                "cluster's own lifecycle bucket (s3:GetObject only).",
            )
        return grant


DEPLOYMENT_ROLE_ID = "FmclusterLifecycleDeploymentRole"
DEPLOYMENT_LOGS_ID = "FmclusterLifecycleDeploymentLogs"


def _deployment_log_group(stack: Stack) -> logs.LogGroup:
    """One log group per stack for the BucketDeployment handler (a singleton function), encrypted with a customer
    managed key like every other log group of the cluster."""
    existing = stack.node.try_find_child(DEPLOYMENT_LOGS_ID)
    if isinstance(existing, logs.LogGroup):
        return existing
    key = ClusterKey(
        stack,
        f"{DEPLOYMENT_LOGS_ID}Key",
        description=f"{stack.stack_name}: logs of the HyperPod lifecycle deployment",
        service_principals={f"logs.{stack.region}.amazonaws.com": logs_key_conditions(stack.region, stack.account)},
    )
    return logs.LogGroup(stack, DEPLOYMENT_LOGS_ID, retention=logs.RetentionDays.ONE_MONTH, encryption_key=key.key,
                         removal_policy=RemovalPolicy.DESTROY)


def _deployment_role(stack: Stack) -> iam.Role:
    """The role of CDK's BucketDeployment handler. The handler is one singleton Lambda per
    stack, so its role is one per stack too, and every LifecycleScripts adds its own bucket."""
    existing = stack.node.try_find_child(DEPLOYMENT_ROLE_ID)
    if isinstance(existing, iam.Role):
        return existing
    role = iam.Role(
        stack,
        DEPLOYMENT_ROLE_ID,
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description="fmcluster: CDK BucketDeployment handler that writes the HyperPod lifecycle scripts",
    )
    log_group = _deployment_log_group(stack)
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[f"{log_group.log_group_arn}:log-stream:*"]
        )
    )
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{_asset_bucket_arn(stack)}/*"]))
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{nag_resource(stack, _asset_bucket_arn(stack))}/*]",
        "CDK BucketDeployment handler reads the source zips (content-addressed keys) from the CDK bootstrap asset bucket; "
        "only s3:GetObject, only that bucket.",
    )
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{nag_resource(stack, log_group.log_group_arn)}:log-stream:*]",
        "CDK BucketDeployment handler writes log streams (created per Lambda instance) in its own log group only.",
    )
    return role


def _acknowledge_deployment_handler(stack: Stack) -> None:
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


def nag_resource(stack: Stack, value: str) -> str:
    """`value` as cdk-nag prints it in a finding id: Ref → <X>, GetAtt → <X.Attr>, joins concatenated."""

    def render(v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, dict) and "Ref" in v:
            return f"<{v['Ref']}>"
        if isinstance(v, dict) and "Fn::GetAtt" in v:
            return f"<{'.'.join(v['Fn::GetAtt'])}>"
        if isinstance(v, dict) and "Fn::Join" in v:
            sep, parts = v["Fn::Join"]
            return str(sep).join(render(p) for p in parts)
        raise ValueError(f"cannot render {v!r} for a cdk-nag acknowledgment")

    return render(stack.resolve(value))


def _asset_bucket_arn(stack: Stack) -> str:
    bucket_name = getattr(stack.synthesizer, "bucket_name", None)
    if not isinstance(bucket_name, str):
        bucket_name = f"cdk-*-assets-{stack.account}-{stack.region}"
    return f"arn:{stack.partition}:s3:::{bucket_name}"

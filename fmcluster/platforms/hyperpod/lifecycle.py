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

from aws_cdk import Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from fmcluster.constructs.bucket_deployment import (
    acknowledge_deployment_handler,
    deployment_log_group,
    deployment_role,
    explicit_bucket_policy,
    grant_destination,
    nag_resource,
    secure_bucket,
    server_access_log_bucket,
)
from fmcluster.constructs.node_bootstrap import RUNTIME_DIR
from fmcluster.nag import acknowledge

PREFIX = "lifecycle/"
RUNTIME_PREFIX = f"{PREFIX}pkg/fmcluster/runtime/"
ENTRY_SCRIPT = "on_init_complete.sh"
ENTRY_STUB = '#!/bin/bash\nexec bash "$(dirname "$0")/pkg/fmcluster/runtime/lifecycle/on_init_complete.sh" "$@"\n'
HOOKS = ("OnInitComplete", "OnCreate")
ENTRY_NAME = r"^[A-Za-z0-9._-]{1,125}\.sh$"
# Cluster names the spec allows; the bucket name embeds one, so it must be a valid bucket label.
CLUSTER_NAME = re.compile(r"^[a-z0-9](-*[a-z0-9])*$")
MAX_CLUSTER_NAME = 25

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
    :param entry_scripts: entry script name -> its text, at the root of the prefix; default: the Slurm stub
        ``on_init_complete.sh``.
    :param hook: ``OnInitComplete`` (HyperPod's own setup first; Slurm) or ``OnCreate`` (the script owns node
        creation's extra steps; HyperPod on EKS) — the LifeCycleConfig key that names the entry script.

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
        entry_scripts: Optional[Mapping[str, str]] = None,
        hook: str = "OnInitComplete",
    ) -> None:
        super().__init__(scope, id)
        if hook not in HOOKS:
            raise ValueError(f"hook: {hook!r} is not one of {', '.join(HOOKS)}")
        self.entry_scripts = dict(entry_scripts) if entry_scripts is not None else {ENTRY_SCRIPT: ENTRY_STUB}
        if not self.entry_scripts or any(not re.match(ENTRY_NAME, n) for n in self.entry_scripts):
            raise ValueError(f"entry_scripts: file names of letters, digits, '.', '_' and '-' ending in .sh, got "
                             f"{list(self.entry_scripts) or 'none'}")
        self.hook = hook
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
            access_logs_bucket = server_access_log_bucket(self, "AccessLogs", logged="lifecycle bucket",
                                                          retention=access_logs_retention)
        bucket_name = f"sagemaker-{cluster_name}-{stack.account}-{stack.region}"
        self.bucket_name = bucket_name
        self.bucket = secure_bucket(
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
        explicit_bucket_policy(self.bucket)

        role = _deployment_role(stack)
        files = [
            *(s3deploy.Source.data(name, text) for name, text in self.entry_scripts.items()),
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
        grant_destination(role, self.bucket, PREFIX)
        acknowledge_deployment_handler(stack)

    @property
    def source_s3_uri(self) -> str:
        """``s3://<bucket>/lifecycle/`` — HyperPod's LifeCycleConfig.SourceS3Uri."""
        # the name as built (not a Ref), so the template shows the s3://sagemaker- prefix HyperPod requires
        return f"s3://{self.bucket_name}/{PREFIX}"

    @property
    def entry_script(self) -> str:
        """The default entry script's name under ``source_s3_uri`` (the first of ``entry_scripts``)."""
        return next(iter(self.entry_scripts))

    def config_for(self, entry: Optional[str] = None) -> sagemaker.CfnCluster.ClusterLifeCycleConfigProperty:
        """An instance group's LifeCycleConfig: ``source_s3_uri`` and `entry` (default: `entry_script`) under the
        lifecycle's hook."""
        name = entry or self.entry_script
        if name not in self.entry_scripts:
            raise ValueError(f"entry: {name!r} is not one of the deployed entry scripts ({', '.join(self.entry_scripts)})")
        if self.hook == "OnCreate":
            # OnCreate: the script runs when HyperPod creates the node (HyperPod on EKS: before the node joins)
            return sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(source_s3_uri=self.source_s3_uri, on_create=name)
        # OnInitComplete: HyperPod configures and starts Slurm and mounts FSx first, then runs our script
        # (fmcluster/runtime/lifecycle/README.md); OnCreate would leave both to the script
        return sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(source_s3_uri=self.source_s3_uri,
                                                                    on_init_complete=name)

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
    return deployment_log_group(stack, DEPLOYMENT_LOGS_ID,
                                description=f"{stack.stack_name}: logs of the HyperPod lifecycle deployment")


def _deployment_role(stack: Stack) -> iam.Role:
    return deployment_role(
        stack, DEPLOYMENT_ROLE_ID,
        description="fmcluster: CDK BucketDeployment handler that writes the HyperPod lifecycle scripts",
        log_group=_deployment_log_group(stack),
    )

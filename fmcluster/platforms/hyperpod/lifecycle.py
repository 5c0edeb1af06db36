"""The HyperPod lifecycle bucket: an S3 bucket named ``sagemaker-...`` holding each instance group's fixed entry
script, each group's pointer and the content-addressed fmcluster runtime, deployed with
``aws_s3_deployment.BucketDeployment``.

Layout (lifecycle_entry.py says why)::

    lifecycle/<entry>.sh          HyperPod's SourceS3Uri: one fixed entry per instance group (its OnCreate or
                                  OnInitComplete), the same bytes across routine changes
    boot/groups/<group>.json      the group's pointer: runtime key and sha256, lifecycle parameters, NodeProfile
    runtime/<sha256>.zip          the node runtime; never pruned while the stack lives

A new runtime or setting adds a runtime object and rewrites the pointers; the instance groups' LifeCycleConfig and
the entries stay as they are. The bucket holds nothing but what synthesis produced, so it is DESTROYed with the
cluster stack (auto-delete empties it first).
"""

from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional, cast

from aws_cdk import CfnResource, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from fmcluster.constructs import node_bootstrap
from fmcluster.constructs.boot_pointer import GROUPS_PREFIX as POINTER_PREFIX
from fmcluster.constructs.boot_pointer import REPORTS_PREFIX
from fmcluster.constructs.bucket_deployment import (
    acknowledge_deployment_handler,
    deployment_log_group,
    deployment_role,
    explicit_bucket_policy,
    grant_destination,
    grant_node_reports,
    nag_resource,
    secure_bucket,
    server_access_log_bucket,
)
from fmcluster.constructs.runtime_archive import KEY_PREFIX as RUNTIME_PREFIX
from fmcluster.constructs.runtime_archive import object_key, sha256_of, staged
from fmcluster.nag import acknowledge
from fmcluster.platforms.hyperpod import lifecycle_entry

PREFIX = "lifecycle/"
HOOKS = tuple(lifecycle_entry.RUNTIME_SCRIPTS)
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
    :param entries: entry script name (``[A-Za-z0-9._-]+.sh``) -> the instance group it starts; each group's
        LifeCycleConfig names its entry (`config_for`).
    :param parameters: the lifecycle parameters, in every group's pointer; values may be tokens.
    :param profiles: instance group name → NodeProfile JSON text, in that group's pointer (other groups: none).
    :param access_logs_bucket: where S3 server access logs go; default: a bucket created here
        (SSE-S3, TLS-only, retained, objects expire after ``access_logs_retention``).
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
        entries: Mapping[str, str],
        parameters: Mapping[str, Any],
        profiles: Mapping[str, str],
        access_logs_bucket: Optional[s3.IBucket] = None,
        access_logs_retention: Duration = Duration.days(365),
        hook: str = "OnInitComplete",
    ) -> None:
        super().__init__(scope, id)
        if hook not in HOOKS:
            raise ValueError(f"hook: {hook!r} is not one of {', '.join(HOOKS)}")
        if not entries or any(not re.match(ENTRY_NAME, n) for n in entries):
            raise ValueError(f"entries: file names of letters, digits, '.', '_' and '-' ending in .sh, got "
                             f"{list(entries) or 'none'}")
        self.entries = dict(entries)
        if set(profiles) - set(self.entries.values()):
            raise ValueError(f"profiles: {sorted(set(profiles) - set(self.entries.values()))} have no entry")
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
        log_group = _deployment_log_group(stack)
        # The runtime by its sha256, never pruned: a node that read a pointer just before a deploy rewrote it still
        # finds the runtime it names.
        archive = node_bootstrap.runtime_zip()
        self.runtime_sha256 = sha256_of(archive)
        self.runtime_key = object_key(self.runtime_sha256)
        self.runtime = s3deploy.BucketDeployment(
            self,
            "Runtime",
            sources=[s3deploy.Source.asset(str(staged(archive, f"{self.runtime_sha256}.zip")))],
            destination_bucket=self.bucket,
            destination_key_prefix=RUNTIME_PREFIX,
            prune=False,
            role=role.without_policy_updates(),
            log_group=log_group,
        )
        # The pointers, after the runtime they name; a group removed from the spec keeps its pointer (its last
        # instances may still be starting).
        self.pointer_documents = {
            lifecycle_entry.pointer_key(group): lifecycle_entry.pointer_document(
                group=group, runtime_key=self.runtime_key, sha256=self.runtime_sha256, parameters=parameters,
                profile_json=profiles.get(group),
                reports=None if profiles.get(group) is None else {
                    "url": f"s3://{bucket_name}/{REPORTS_PREFIX}{group}/", "region": stack.region,
                    "pointer": lifecycle_entry.pointer_key(group), "platform": "hyperpod"})
            for group in sorted(set(self.entries.values()))
        }
        self.pointers = s3deploy.BucketDeployment(
            self,
            "Pointers",
            sources=[s3deploy.Source.json_data(key[len(POINTER_PREFIX):], document)
                     for key, document in self.pointer_documents.items()],
            destination_bucket=self.bucket,
            destination_key_prefix=POINTER_PREFIX,
            prune=False,
            role=role.without_policy_updates(),
            log_group=log_group,
        )
        self.pointers.node.add_dependency(self.runtime)
        # what the pointers say, in the template too (as constructs/node_bootstrap.py does): reviewers and
        # `fmcluster diff` see it without the assets; the parameters' deploy-time values are left out
        cast(CfnResource, self.pointers.node.find_child("CustomResource").node.default_child).add_metadata(
            node_bootstrap.POINTERS_METADATA, {key: _summary(doc) for key, doc in self.pointer_documents.items()})
        # The entries HyperPod downloads: fixed text (bucket, region, group, script name). Pruning removes what an
        # earlier fmcluster kept under this prefix (its runtime tree, parameters and profiles).
        self.entry_scripts = {
            name: lifecycle_entry.entry_script(bucket=bucket_name, region=stack.region, group=group, hook=hook)
            for name, group in self.entries.items()
        }
        self.scripts = s3deploy.BucketDeployment(
            self,
            "Scripts",
            sources=[s3deploy.Source.data(name, text) for name, text in self.entry_scripts.items()],
            destination_bucket=self.bucket,
            destination_key_prefix=PREFIX,
            role=role.without_policy_updates(),
            log_group=log_group,
        )
        self.scripts.node.add_dependency(self.pointers)
        # The handler role is immutable for the deployments (CDK's grants use wildcard
        # actions); it gets these explicit ones instead.
        for prefix in (PREFIX, RUNTIME_PREFIX, POINTER_PREFIX):
            grant_destination(role, self.bucket, prefix)
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
        # OnInitComplete: HyperPod configures and starts Slurm and mounts its stores first, then runs our script
        # (node/README.md); OnCreate would leave both to the script
        return sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(source_s3_uri=self.source_s3_uri,
                                                                    on_init_complete=name)

    @property
    def deployments(self) -> List[s3deploy.BucketDeployment]:
        """What must finish before nodes boot (the cluster depends on these)."""
        return [self.runtime, self.pointers, self.scripts]

    def grant_report(self, grantee: iam.IGrantable) -> Optional[iam.Grant]:
        """s3:PutObject under the node-report prefix of each group whose nodes validate (runtime/node_report.py)."""
        groups = sorted(d["group"] for d in self.pointer_documents.values() if d.get("reports"))
        if not groups:
            return None
        return grant_node_reports(grantee, self.bucket, [f"{REPORTS_PREFIX}{g}/" for g in groups],
                                  bucket_role="the cluster's lifecycle bucket")

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """What nodes read: the entries (s3:GetObject under ``lifecycle/``, s3:ListBucket limited to that prefix, as
        HyperPod downloads the prefix), exactly this cluster's pointers, and the runtime objects (``runtime/*``: a node
        may be handed any runtime a pointer named; it checks the sha256)."""
        entries = self.bucket.arn_for_objects(f"{PREFIX}*")
        runtimes = self.bucket.arn_for_objects(f"{RUNTIME_PREFIX}*")
        pointers = [self.bucket.arn_for_objects(key) for key in self.pointer_documents]
        grant = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                           resource_arns=[entries, runtimes, *pointers])
        grant = grant.combine(iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:ListBucket"],
            resource_arns=[self.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [PREFIX, f"{PREFIX}*"]}},
        ))
        if isinstance(grantee, Construct):
            for arn, why in ((entries, "the lifecycle entry scripts under the lifecycle/ prefix HyperPod downloads"),
                             (runtimes, "any fmcluster runtime object a group's pointer names (checked by sha256)")):
                acknowledge(grantee, f"AwsSolutions-IAM5[Resource::{nag_resource(Stack.of(self), arn)}]",
                            f"Nodes read {why} in the cluster's own lifecycle bucket (s3:GetObject only).")
        return grant


def _summary(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """A pointer as `fmcluster diff` reads boot pointers: runtime, validation level and policy, profile."""
    validation = document["parameters"].get("validation") or {}
    return {"runtime": document["runtime"], "level": validation.get("level"), "policy": validation.get("policy"),
            "profile": document["profile"]}


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

"""What every ParallelCluster node reads, under stable keys of a bucket the cluster stack owns.

ParallelCluster refuses any update of the head node's ``OnNodeConfigured`` Script and Args (its schema marks them
UNSUPPORTED), and an update of a queue's replaces every compute node of the queue (QUEUE_UPDATE_STRATEGY). So the
configuration names only keys that never change, and a deployment puts the current objects there::

    s3://<bucket>/fmcluster/on_node_configured.sh   the custom action ParallelCluster downloads and runs
    s3://<bucket>/fmcluster/runtime/<sha256>.zip    the fmcluster runtime, one object per release, never pruned
    s3://<bucket>/fmcluster/settings.json           the node collectors' settings (cluster label, AMP URL, interval)
                                                    and the runtime's key and sha256 (nodes check what they fetched):
                                                    what the head node reads
    s3://<bucket>/fmcluster/groups/<group>.json     what a compute node of the group reads, in one object: the same
                                                    settings and the group's NodeProfile, so a node booting while a
                                                    deploy rewrites the bucket gets one deployment's pair, never a mix
    s3://<bucket>/fmcluster/profiles/<group>.json   each node group's NodeProfile, as earlier releases' scripts read it
                                                    (a node running such a script during this release's first deploy)
    s3://<bucket>/fmcluster/mounts.sh               the boot lines of the stores ParallelCluster does not mount itself
                                                    (Mountpoint for Amazon S3): only where the spec has such a store

A node reads them when its action runs: at its launch, and on the head node after every cluster update
(``OnNodeUpdated``, which ParallelCluster does update; `revision` changes with the head node's inputs so that an
update runs it). docs/parallelcluster.md, "Updates".

The bucket: versioned (a rollback's objects stay readable; old versions expire), SSE-S3, TLS only, public access
blocked, ACLs off; emptied and deleted with the stack after the cluster is gone, or retained with a retained
cluster (whose replacement nodes still read it)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct, IConstruct

from fmcluster.constructs import node_bootstrap
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

PREFIX = "fmcluster/"
SCRIPT = "on_node_configured.sh"
LEGACY_RUNTIME = "runtime.zip"  # the key earlier releases wrote; left in place for nodes still booting from it
SETTINGS = "settings.json"
MOUNTS = "mounts.sh"
PROFILES = "profiles/"
GROUPS = "groups/"
GROUP_SCHEMA = 1
REPORTS = "node-reports/"  # where compute nodes put their node reports (runtime/node_report.py), per group
ACCESS_LOGS_PREFIX = "node-assets/"
SCRIPT_PATH = Path(__file__).resolve().parent / "node" / SCRIPT  # the kind's node folder
# How long replaced object versions stay readable (a node that started fetching before a deployment, a rollback).
NONCURRENT_DAYS = 30
DEPLOYMENT_ROLE_ID = "NodeAssetsDeploymentRole"
DEPLOYMENT_LOGS_ID = "NodeAssetsDeploymentLogs"
def group_document(group: str, settings: Mapping[str, Any], profile_json: str,
                   reports: Optional[Mapping[str, str]] = None) -> dict:
    """``groups/<group>.json``: what a compute node of the group reads, in one object (on_node_configured.sh
    checks the schema and the group); `reports`: where its nodes put their node reports (runtime/node_report.py)."""
    document = {"schema": GROUP_SCHEMA, "group": group, "settings": dict(settings),
                "profile": json.loads(profile_json)}
    if reports is not None:
        document["reports"] = dict(reports)
    return document


class NodeAssets(Construct):
    """The node assets bucket and the deployment that fills it.

    :param settings: written to ``settings.json`` (CDK tokens allowed): what the script reads on every node.
    :param profiles: node group name -> NodeProfile JSON, written to ``profiles/<group>.json``.
    :param retain: keep the bucket when the stack is deleted (the cluster stays; its new nodes read the bucket).
    :param runtime_dir: the runtime to publish (default: fmcluster's).
    :param mounts: ``mounts.sh``, the shell script that mounts the stores the nodes mount themselves (None: none, and
        no object).

    Exposes ``bucket``, ``access_logs`` (its server access logs' bucket), ``deployment``,
    ``settings``, ``profiles``, ``source_url`` (``s3://<bucket>/fmcluster/``),
    ``script_url``, ``mounts_url`` (None without mounts), ``revision`` (changes with anything the head node
    reads), `grant_read` and `depend_on_contents`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: Mapping[str, Any],
        profiles: Mapping[str, str],
        retain: bool = False,
        runtime_dir: Optional[Path] = None,
        mounts: Optional[str] = None,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        for group in profiles:
            if not group or "/" in group:
                raise ValueError(f"profiles: {group!r} is not a node group name")
        self.profile_groups: List[str] = sorted(profiles)
        self.settings = dict(settings)
        self.profiles = {g: profiles[g] for g in self.profile_groups}
        self.mounts = mounts
        # Server access logs like the data and lifecycle buckets: which node (role) read which asset, when.
        self.access_logs = server_access_log_bucket(self, "AccessLogs", logged="ParallelCluster node assets bucket")
        self.bucket = secure_bucket(
            self,
            "Bucket",
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=ACCESS_LOGS_PREFIX,
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=Duration.days(NONCURRENT_DAYS),
                                              abort_incomplete_multipart_upload_after=Duration.days(1))],
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
            auto_delete_objects=not retain,
        )
        if not retain:
            explicit_bucket_policy(self.bucket)
        archive = node_bootstrap.runtime_zip(runtime_dir)
        runtime_digest = sha256_of(archive)
        self.runtime_key = object_key(runtime_digest)
        self.settings["runtime"] = {"key": self.runtime_key, "sha256": runtime_digest}
        script = SCRIPT_PATH.read_text()
        log_group = deployment_log_group(stack, DEPLOYMENT_LOGS_ID,
                                         description=f"{stack.stack_name}: logs of the ParallelCluster node assets "
                                         "deployment")
        role = deployment_role(stack, DEPLOYMENT_ROLE_ID,
                               description="fmcluster: CDK BucketDeployment handler that writes the ParallelCluster "
                               "node assets", log_group=log_group)
        # Runtimes are never pruned: a node that read settings.json just before a deploy rewrote it still finds the
        # runtime it names. A few hundred KB per release; they go with the bucket.
        self.runtime_deployment = s3deploy.BucketDeployment(
            self,
            "Runtime",
            sources=[s3deploy.Source.asset(str(staged(archive, f"{runtime_digest}.zip")))],
            destination_bucket=self.bucket,
            destination_key_prefix=f"{PREFIX}{RUNTIME_PREFIX}",
            prune=False,
            role=role.without_policy_updates(),
            log_group=log_group,
        )
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Deployment",
            sources=[
                s3deploy.Source.data(SCRIPT, script),
                s3deploy.Source.json_data(SETTINGS, self.settings),
                *(s3deploy.Source.data(f"{PROFILES}{g}.json", text) for g, text in self.profiles.items()),
                *(s3deploy.Source.json_data(f"{GROUPS}{g}.json", group_document(g, self.settings, text, {
                    "url": f"s3://{self.bucket.bucket_name}/{PREFIX}{REPORTS}{g}/", "region": stack.region,
                    "pointer": f"{PREFIX}{GROUPS}{g}.json", "platform": "ec2"}))
                  for g, text in self.profiles.items()),
                *((s3deploy.Source.data(MOUNTS, mounts),) if mounts is not None else ()),
            ],
            destination_bucket=self.bucket,
            destination_key_prefix=PREFIX,
            # prune stale profiles, never a runtime nor what nodes wrote
            exclude=[f"{RUNTIME_PREFIX}*", LEGACY_RUNTIME, f"{REPORTS}*"],
            role=role.without_policy_updates(),
            log_group=log_group,
        )
        # settings.json never names a runtime that is not there yet
        self.deployment.node.add_dependency(self.runtime_deployment)
        grant_destination(role, self.bucket, PREFIX)
        acknowledge_deployment_handler(stack)
        inputs = {
            "script": hashlib.sha256(script.encode()).hexdigest(),
            "runtime": runtime_digest,
            "settings": stack.resolve(self.settings),
        }
        if mounts is not None:  # the head node's OnNodeUpdated runs it again when it changes
            inputs["mounts"] = stack.resolve(mounts)
        self.revision = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def source_url(self) -> str:
        """``s3://<bucket>/fmcluster/``: the same string on every deploy (the bucket keeps its logical id)."""
        return f"s3://{self.bucket.bucket_name}/{PREFIX}"

    @property
    def script_url(self) -> str:
        return f"{self.source_url}{SCRIPT}"

    @property
    def mounts_url(self) -> Optional[str]:
        return f"{self.source_url}{MOUNTS}" if self.mounts is not None else None

    def object_arns(self, profiles: Sequence[str] = ()) -> List[str]:
        unknown = sorted(set(profiles) - set(self.profile_groups))
        if unknown:
            raise ValueError(f"profiles: no profile published for {', '.join(unknown)}")
        keys = [SCRIPT, f"{RUNTIME_PREFIX}*", SETTINGS] + [f"{d}{g}.json" for g in profiles for d in (GROUPS, PROFILES)]
        if self.mounts is not None:
            keys.append(MOUNTS)
        return [self.bucket.arn_for_objects(f"{PREFIX}{k}") for k in keys]

    def grant_read(self, grantee: iam.IGrantable, *, profiles: Sequence[str] = ()) -> iam.Grant:
        """s3:GetObject on exactly the script, the settings, the mounts script and the given groups' objects and
        profiles, and on the runtime objects (``runtime/*``: whichever the settings name, checked against its sha256)."""
        grant = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                           resource_arns=self.object_arns(profiles))
        if isinstance(grantee, Construct):
            runtimes = self.bucket.arn_for_objects(f"{PREFIX}{RUNTIME_PREFIX}*")
            acknowledge(grantee, f"AwsSolutions-IAM5[Resource::{nag_resource(Stack.of(self), runtimes)}]",
                        "Nodes read any fmcluster runtime object of the cluster's own node assets bucket (s3:GetObject "
                        "only): which one is named by settings.json, and checked against its sha256.")
        return grant

    def grant_report(self, grantee: iam.IGrantable, *, groups: Sequence[str]) -> iam.Grant:
        """s3:PutObject under each of `groups`' node-report prefixes (runtime/node_report.py)."""
        return grant_node_reports(grantee, self.bucket, [f"{PREFIX}{REPORTS}{g}/" for g in groups],
                                  bucket_role="the node assets bucket")

    def depend_on_contents(self, construct: IConstruct) -> None:
        """`construct` (the cluster) is created and updated after the objects are in place, and deleted before the
        bucket is emptied."""
        construct.node.add_dependency(self.deployment)
        emptier = self.bucket.node.try_find_child("AutoDeleteObjectsCustomResource")
        if emptier is not None:
            construct.node.add_dependency(emptier)

"""What every ParallelCluster node reads, under stable keys of a bucket the cluster stack owns.

ParallelCluster refuses any update of the head node's ``OnNodeConfigured`` Script and Args (its schema marks them
UNSUPPORTED), and an update of a queue's replaces every compute node of the queue (QUEUE_UPDATE_STRATEGY). So the
configuration names only keys that never change, and a deployment puts the current objects there::

    s3://<bucket>/fmcluster/on_node_configured.sh   the custom action ParallelCluster downloads and runs
    s3://<bucket>/fmcluster/runtime.zip             the fmcluster runtime, one object (a node reads it whole or not)
    s3://<bucket>/fmcluster/settings.json           the node collectors' settings (cluster label, AMP URL, interval)
    s3://<bucket>/fmcluster/profiles/<group>.json   each node group's NodeProfile

A node reads them when its action runs: at its launch, and on the head node after every cluster update
(``OnNodeUpdated``, which ParallelCluster does update; `revision` changes with the head node's inputs so that an
update runs it). docs/parallelcluster.md, "Updates".

The bucket: versioned (a rollback's objects stay readable; old versions expire), SSE-S3, TLS only, public access
blocked, ACLs off; emptied and deleted with the stack after the cluster is gone, or retained with a retained
cluster (whose replacement nodes still read it)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Tuple

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
    secure_bucket,
    server_access_log_bucket,
)

PREFIX = "fmcluster/"
SCRIPT = "on_node_configured.sh"
RUNTIME = "runtime.zip"
SETTINGS = "settings.json"
PROFILES = "profiles/"
ACCESS_LOGS_PREFIX = "node-assets/"
SCRIPT_DIR = "parallelcluster"  # where the script lives in the runtime
# How long replaced object versions stay readable (a node that started fetching before a deployment, a rollback).
NONCURRENT_DAYS = 30
DEPLOYMENT_ROLE_ID = "NodeAssetsDeploymentRole"
DEPLOYMENT_LOGS_ID = "NodeAssetsDeploymentLogs"
# A ZIP's earliest timestamp: every entry gets it, so the archive depends on the files' contents only.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def runtime_archive(runtime_dir: Path) -> bytes:
    """The runtime directory as one deterministic ZIP: entries sorted, fixed timestamps and modes, stored (no
    compression, whose bytes could differ between zlib builds), caches left out. Same files, same bytes."""
    files = sorted(p for p in runtime_dir.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for f in files:
            info = zipfile.ZipInfo(f.relative_to(runtime_dir).as_posix(), date_time=ZIP_EPOCH)
            info.create_system = 3  # Unix
            info.external_attr = 0o644 << 16
            archive.writestr(info, f.read_bytes())
    return buffer.getvalue()


def _staged(data: bytes, name: str) -> Tuple[Path, str]:
    """A directory holding `data` as `name`, named after its digest (the asset the deployment extracts)."""
    digest = hashlib.sha256(data).hexdigest()
    stage = Path(tempfile.gettempdir()) / f"fmcluster-pc-{digest[:24]}"
    target = stage / name
    if not target.exists() or target.read_bytes() != data:
        stage.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=stage)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    return stage, digest


class NodeAssets(Construct):
    """The node assets bucket and the deployment that fills it.

    :param settings: written to ``settings.json`` (CDK tokens allowed): what the script reads on every node.
    :param profiles: node group name -> NodeProfile JSON, written to ``profiles/<group>.json``.
    :param retain: keep the bucket when the stack is deleted (the cluster stays; its new nodes read the bucket).
    :param runtime_dir: the runtime to publish (default: fmcluster's).

    Exposes ``bucket``, ``access_logs`` (its server access logs' bucket), ``deployment``,
    ``settings``, ``profiles``, ``source_url`` (``s3://<bucket>/fmcluster/``),
    ``script_url``, ``revision`` (changes with anything the head node reads), `grant_read` and `depend_on_contents`.
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
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        for group in profiles:
            if not group or "/" in group:
                raise ValueError(f"profiles: {group!r} is not a node group name")
        self.profile_groups: List[str] = sorted(profiles)
        self.settings = dict(settings)
        self.profiles = {g: profiles[g] for g in self.profile_groups}
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
        runtime = runtime_dir or node_bootstrap.RUNTIME_DIR
        stage, runtime_digest = _staged(runtime_archive(runtime), RUNTIME)
        script = (runtime / SCRIPT_DIR / SCRIPT).read_text()
        log_group = deployment_log_group(stack, DEPLOYMENT_LOGS_ID,
                                         description=f"{stack.stack_name}: logs of the ParallelCluster node assets "
                                         "deployment")
        role = deployment_role(stack, DEPLOYMENT_ROLE_ID,
                               description="fmcluster: CDK BucketDeployment handler that writes the ParallelCluster "
                               "node assets", log_group=log_group)
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Deployment",
            sources=[
                s3deploy.Source.data(SCRIPT, script),
                s3deploy.Source.asset(str(stage)),
                s3deploy.Source.json_data(SETTINGS, self.settings),
                *(s3deploy.Source.data(f"{PROFILES}{g}.json", text) for g, text in self.profiles.items()),
            ],
            destination_bucket=self.bucket,
            destination_key_prefix=PREFIX,
            role=role.without_policy_updates(),
            log_group=log_group,
        )
        grant_destination(role, self.bucket, PREFIX)
        acknowledge_deployment_handler(stack)
        self.revision = hashlib.sha256(json.dumps({
            "script": hashlib.sha256(script.encode()).hexdigest(),
            "runtime": runtime_digest,
            "settings": stack.resolve(self.settings),
        }, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def source_url(self) -> str:
        """``s3://<bucket>/fmcluster/``: the same string on every deploy (the bucket keeps its logical id)."""
        return f"s3://{self.bucket.bucket_name}/{PREFIX}"

    @property
    def script_url(self) -> str:
        return f"{self.source_url}{SCRIPT}"

    def object_arns(self, profiles: Sequence[str] = ()) -> List[str]:
        unknown = sorted(set(profiles) - set(self.profile_groups))
        if unknown:
            raise ValueError(f"profiles: no profile published for {', '.join(unknown)}")
        keys = [SCRIPT, RUNTIME, SETTINGS] + [f"{PROFILES}{g}.json" for g in profiles]
        return [self.bucket.arn_for_objects(f"{PREFIX}{k}") for k in keys]

    def grant_read(self, grantee: iam.IGrantable, *, profiles: Sequence[str] = ()) -> iam.Grant:
        """s3:GetObject on exactly the script, the runtime, the settings and the given groups' profiles."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"],
                                          resource_arns=self.object_arns(profiles))

    def depend_on_contents(self, construct: IConstruct) -> None:
        """`construct` (the cluster) is created and updated after the objects are in place, and deleted before the
        bucket is emptied."""
        construct.node.add_dependency(self.deployment)
        emptier = self.bucket.node.try_find_child("AutoDeleteObjectsCustomResource")
        if emptier is not None:
            construct.node.add_dependency(emptier)

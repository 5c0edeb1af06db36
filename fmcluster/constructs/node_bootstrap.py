"""What every node runs at boot: the fmcluster runtime in a bucket the cluster stack owns, each node group's boot
pointer (runtime, NodeProfile, validation level and policy; constructs/boot_pointer.py), and user data (MIME
multi-part, as PCS requires) that reads the pointer and runs the shared bootstrap in
fmcluster/runtime/node_bootstrap.sh. User data names only stable things, so a new runtime or validation setting
leaves launch templates unchanged (docs/changes.md, "Routine changes")."""

from __future__ import annotations

import json
from pathlib import Path
from shlex import quote
from typing import Any, Dict, Optional, Sequence, Tuple, cast

from aws_cdk import CfnResource, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from fmcluster.constructs import boot_pointer
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
from fmcluster.constructs.runtime_archive import node_folders, object_key, runtime_archive, sha256_of, staged
from fmcluster.nag import acknowledge

RUNTIME_DIR = Path(__file__).resolve().parent.parent / "runtime"
BOUNDARY = "==FMCLUSTER=="
ACCESS_LOGS_PREFIX = "node-runtime/"
DEPLOYMENT_ROLE_ID = "NodeRuntimeDeploymentRole"
DEPLOYMENT_LOGS_ID = "NodeRuntimeDeploymentLogs"
# The pointers' documents, as metadata of the deployment that writes them.
POINTERS_METADATA = "fmcluster:boot-pointers"


def runtime_zip(runtime_dir: Optional[Path] = None) -> bytes:
    """The one runtime archive every node fetches, whatever orchestrates it: `runtime_dir` (default RUNTIME_DIR, read
    when called) and every platform's and kind's node folder (constructs/runtime_archive.py)."""
    return runtime_archive(runtime_dir or RUNTIME_DIR, with_folders=node_folders())


class NodeRuntime(Construct):
    """The node-side package (standard-library Python and scripts) as one deterministic zip in a bucket of the cluster
    stack, keyed by its sha256 (``runtime/<sha256>.zip``), and each node group's boot pointer (constructs/boot_pointer.py)
    under a stable key that names it.

    Not the CDK bootstrap bucket: on accounts bootstrapped with a customer managed key the nodes could not decrypt
    it, and ``cdk gc`` removes assets that nodes launched months later still fetch. Runtime objects are never pruned
    while the stack lives (prune off; a new runtime adds a key): a node that read a pointer just before a deploy
    rewrote it still finds the runtime it names, and so do instances launched from launch-template versions written
    before the pointer existed, which name ``runtime/<asset hash>.zip`` directly. They go with the stack (a few
    hundred KB per release). The bucket is versioned and TLS-only. Exposes ``bucket``, ``object_key``, ``sha256``,
    ``deployment`` and ``pointers`` (what node launches must wait for: `required_by`), ``access_logs``, `publish`
    (a group's pointer), `pointer_documents` and ``grant_read``.
    """

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        archive = runtime_zip()
        self.sha256 = sha256_of(archive)
        self.object_key = object_key(self.sha256)
        # Server access logs like the data and lifecycle buckets: which node (role) read the runtime, when.
        self.access_logs = server_access_log_bucket(self, "AccessLogs", logged="node runtime bucket")
        self.bucket = secure_bucket(self, "Bucket", versioned=True, removal_policy=RemovalPolicy.DESTROY,
                                    auto_delete_objects=True, server_access_logs_bucket=self.access_logs,
                                    server_access_logs_prefix=ACCESS_LOGS_PREFIX)
        explicit_bucket_policy(self.bucket)
        log_group = deployment_log_group(stack, DEPLOYMENT_LOGS_ID,
                                         description=f"{stack.stack_name}: logs of the node runtime deployment")
        self._role = deployment_role(
            stack, DEPLOYMENT_ROLE_ID,
            description="fmcluster: CDK BucketDeployment handler that copies the node runtime into its bucket",
            log_group=log_group,
        )
        self._log_group = log_group
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Deploy",
            sources=[s3deploy.Source.asset(str(staged(archive, f"{self.sha256}.zip")))],
            destination_bucket=self.bucket,
            destination_key_prefix=RUNTIME_PREFIX,
            prune=False,  # older runtimes stay for nodes that read an older pointer or launch-template version
            role=self._role.without_policy_updates(),
            log_group=log_group,
        )
        grant_destination(self._role, self.bucket, RUNTIME_PREFIX)
        grant_destination(self._role, self.bucket, boot_pointer.PREFIX)
        acknowledge_deployment_handler(stack)
        self._documents: Dict[str, Dict[str, Any]] = {}
        self.pointers: Optional[s3deploy.BucketDeployment] = None

    def publish(self, *, key: str, group: str, level: str, policy: str, profile_json: Optional[str]) -> str:
        """Write `group`'s pointer under `key` (boot_pointer.group_key or LOGIN_KEY) at deploy time, after the runtime
        it names; returns `key`. Publishing the same key twice must say the same thing."""
        reports = None if profile_json is None else {
            "url": f"s3://{self.bucket.bucket_name}/{boot_pointer.REPORTS_PREFIX}{group}/",
            "region": Stack.of(self).region, "pointer": key, "platform": "ec2"}
        document = boot_pointer.pointer_document(group=group, runtime_key=self.object_key, sha256=self.sha256,
                                                 level=level, policy=policy, profile_json=profile_json,
                                                 reports=reports)
        if self._documents.get(key, document) != document:
            raise ValueError(f"boot pointer {key}: published twice with different contents")
        if key in self._documents:
            return key
        self._documents[key] = document
        source = s3deploy.Source.data(key[len(boot_pointer.PREFIX):], json.dumps(document, sort_keys=True))
        if self.pointers is None:
            self.pointers = s3deploy.BucketDeployment(
                self,
                "Pointers",
                sources=[source],
                destination_bucket=self.bucket,
                destination_key_prefix=boot_pointer.PREFIX,
                # a group removed from the spec may still have instances booting from its pointer
                prune=False,
                role=self._role.without_policy_updates(),
                log_group=self._log_group,
            )
            # a pointer never names a runtime that is not there yet
            self.pointers.node.add_dependency(self.deployment)
        else:
            self.pointers.add_source(source)
        # what the pointers say, in the template too: reviewers and `fmcluster diff` see it without the assets
        cast(CfnResource, self.pointers.node.find_child("CustomResource").node.default_child).add_metadata(
            POINTERS_METADATA, dict(sorted(self._documents.items())))
        return key

    def pointer_documents(self) -> Dict[str, Dict[str, Any]]:
        return dict(self._documents)

    def required_by(self, *dependents: Construct) -> None:
        """Make `dependents` (launch templates, clusters) wait for the runtime's copy and the pointers: a node
        launched before them would find nothing to read."""
        for dependent in dependents:
            dependent.node.add_dependency(self.deployment)
            if self.pointers is not None:
                dependent.node.add_dependency(self.pointers)

    def grant_report(self, grantee: iam.IGrantable, *, groups: Sequence[str]) -> iam.Grant:
        """s3:PutObject under each of `groups`' node-report prefixes (runtime/node_report.py)."""
        return grant_node_reports(grantee, self.bucket, [f"{boot_pointer.REPORTS_PREFIX}{g}/" for g in groups],
                                  bucket_role="the cluster's runtime bucket")

    def grant_read(self, grantee: iam.IGrantable, *, groups: Sequence[str] = (), login: bool = False) -> iam.Grant:
        """s3:GetObject on the runtime objects (``runtime/*``: a node may be handed any runtime a pointer named, and a
        policy naming only today's would refuse a node that read yesterday's pointer during a deploy) and on exactly
        the pointers of `groups` (and the login node's with `login`)."""
        keys = [boot_pointer.group_key(g) for g in groups] + ([boot_pointer.LOGIN_KEY] if login else [])
        runtime_objects = self.bucket.arn_for_objects(f"{RUNTIME_PREFIX}*")
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:GetObject"],
            resource_arns=[runtime_objects, *(self.bucket.arn_for_objects(k) for k in keys)])
        if isinstance(grantee, Construct):
            acknowledge(grantee, f"AwsSolutions-IAM5[Resource::{nag_resource(Stack.of(self), runtime_objects)}]",
                        "Nodes read any fmcluster runtime object of the cluster's own runtime bucket (s3:GetObject "
                        "only): which one is named by the group's boot pointer, and checked against its sha256.")
        return grant


def collectors_step(
    *, cluster: str, region: str, remote_write_url: str, node_group: str, gpu: bool, slurm: bool = False
) -> str:
    """Shell lines that install the node collectors (node_exporter, dcgm-exporter, Prometheus
    agent remote-writing to AMP), and with `slurm` the Slurm node-state collector. A failure is logged,
    never blocks validation."""
    flags = ("" if gpu else " --no-dcgm") + (" --slurm-collector" if slurm else "")
    return (
        "bash /opt/fmcluster/pkg/fmcluster/runtime/observability/install.sh "
        f"--cluster {quote(cluster)} --region {quote(region)} --remote-write-url {quote(remote_write_url)} "
        f"--node-group {quote(node_group)}{flags} || echo 'fmcluster: collector install failed'\n"
    )


def bootstrap_script(
    *,
    boot: str,
    collectors: str = "",
    mount: str = "",
    after_units: Sequence[str] = (),
) -> str:
    """The shell part of the user data: `boot` (boot_pointer.read_pointer_shell: the pointer, the runtime it names,
    the profile, level and policy), then mount shared storage and install collectors (when given), and run the shared
    bootstrap. Network steps retry with backoff, under timeouts.

    With `after_units` the user data runs none of the steps after the pointer itself: it writes them to
    `BOOT_VALIDATION_SCRIPT` and starts that as the systemd unit `BOOT_VALIDATION_UNIT`, ordered after those units
    (`deferred_validation`), for images whose node agent and local disks come up only after cloud-init's user data."""
    head = f"#!/bin/bash\nset -euo pipefail\n{boot}"
    run = boot_pointer.run_bootstrap_shell()
    if not after_units:
        return head + mount + collectors + run
    return head + deferred_validation(mount + collectors + run, after_units)


# The unit and script of a deferred boot validation (bootstrap_script's after_units).
BOOT_VALIDATION_UNIT = "fmcluster-boot-validation.service"
BOOT_VALIDATION_SCRIPT = "/etc/fmcluster/boot-validation.sh"
BOOT_VALIDATION_LOG = "/var/log/fmcluster/boot-validation.log"


def deferred_validation(steps: str, after_units: Sequence[str]) -> str:
    """Shell lines for user data that write `steps` (shell lines ending in the bootstrap) to BOOT_VALIDATION_SCRIPT and
    run it as the oneshot unit BOOT_VALIDATION_UNIT ordered ``After=`` `after_units`.

    The unit is started with ``--no-block``: on the EKS AL2023 AMI `nodeadm-run.service` (local disks, then kubelet) is
    itself ordered after cloud-final.service, the unit this user data runs in, so a blocking start would wait for
    this very script. A queued start job keeps its ordering after the script ends (systemd.unit(5), ``After=``). The
    unit is not enabled: it runs once per instance, at first boot, as user data does. The script runs without
    ``set -e``, so the bootstrap (which publishes a crashed or timed-out validator as a failure) runs whatever a
    step before it did."""
    after = " ".join(after_units)
    return f"""cat >{BOOT_VALIDATION_SCRIPT} <<'FMCLUSTER_STAGE'
#!/bin/bash
# fmcluster boot validation, run by {BOOT_VALIDATION_UNIT} after {after}
set -uo pipefail
exec >>{BOOT_VALIDATION_LOG} 2>&1
echo "$(date -Is) fmcluster boot validation starts"
{steps}FMCLUSTER_STAGE
chmod 0755 {BOOT_VALIDATION_SCRIPT}
cat >/etc/systemd/system/{BOOT_VALIDATION_UNIT} <<'FMCLUSTER_UNIT'
[Unit]
Description=fmcluster boot validation, after {after}
After={after} network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=/bin/bash {BOOT_VALIDATION_SCRIPT}
FMCLUSTER_UNIT
timeout 60 systemctl daemon-reload
timeout 60 systemctl start --no-block {BOOT_VALIDATION_UNIT}
"""


def login_script(*, boot: str, mount: str, collectors: str = "") -> str:
    """A login node's user data: no GPU to validate, but the shared file system users expect, and the
    collectors when given (the login node is where a managed Slurm's node states can be read). `boot`: its pointer's
    reader (boot_pointer.read_pointer_shell with LOGIN_KEY)."""
    return f"""#!/bin/bash
set -euo pipefail
{boot}{mount}{collectors}echo 'fmcluster login node' >/etc/motd.d/fmcluster 2>/dev/null || true
"""


def mime_user_data(shell_script: str, parts_before: Sequence[Tuple[str, str]] = ()) -> str:
    """MIME multi-part user data: PCS and EKS merge their own parts with ours (PCS user guide; EKS user guide,
    "Customizing managed nodes with launch templates"). `parts_before`: (content type, body) parts ahead of the
    shell script, e.g. an ``application/node.eks.aws`` NodeConfig."""
    head = "".join(f"--{BOUNDARY}\nContent-Type: {kind}\n\n{body}\n" for kind, body in parts_before)
    return (
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n'
        "MIME-Version: 1.0\n"
        "\n"
        f"{head}"
        f"--{BOUNDARY}\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\n'
        "\n"
        f"{shell_script}\n"
        f"--{BOUNDARY}--\n"
    )

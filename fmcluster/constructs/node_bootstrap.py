"""What every node runs at boot: the fmcluster runtime in a bucket the cluster stack owns, the node group's
NodeProfile, and user data (MIME multi-part, as PCS requires) that runs the shared bootstrap in
fmcluster/runtime/node_bootstrap.sh."""

from __future__ import annotations

from pathlib import Path
from shlex import quote
from typing import Sequence, Tuple

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from fmcluster.constructs.bucket_deployment import (
    acknowledge_deployment_handler,
    deployment_log_group,
    deployment_role,
    explicit_bucket_policy,
    grant_destination,
    secure_bucket,
    server_access_log_bucket,
)

RUNTIME_DIR = Path(__file__).resolve().parent.parent / "runtime"
BOUNDARY = "==FMCLUSTER=="
RUNTIME_PREFIX = "runtime/"
ACCESS_LOGS_PREFIX = "node-runtime/"
DEPLOYMENT_ROLE_ID = "NodeRuntimeDeploymentRole"
DEPLOYMENT_LOGS_ID = "NodeRuntimeDeploymentLogs"


class NodeRuntime(Construct):
    """The node-side package (standard-library Python and scripts) as one zip in a bucket of the cluster stack, keyed
    by its content hash (``runtime/<hash>.zip``).

    Not the CDK bootstrap bucket: on accounts bootstrapped with a customer managed key the nodes could not decrypt
    it, and ``cdk gc`` removes assets that nodes launched months later from the launch template still fetch. Here
    keys are never pruned while the stack lives (a new runtime adds a key; the old one stays for instances launched
    from older template versions), the bucket is versioned, TLS-only, and goes with the stack, as the launch
    templates that name it do. Exposes ``bucket``, ``object_key``, ``s3_url``, ``deployment`` (what node launches
    must wait for: `required_by`), ``access_logs`` (where its server access logs go) and
    ``grant_read``.
    """

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.asset = s3_assets.Asset(
            self,
            "Asset",
            path=str(RUNTIME_DIR),
            exclude=["__pycache__", "**/__pycache__", "*.pyc"],
        )
        # Server access logs like the data and lifecycle buckets: which node (role) read the runtime, when.
        self.access_logs = server_access_log_bucket(self, "AccessLogs", logged="node runtime bucket")
        self.bucket = secure_bucket(self, "Bucket", versioned=True, removal_policy=RemovalPolicy.DESTROY,
                                    auto_delete_objects=True, server_access_logs_bucket=self.access_logs,
                                    server_access_logs_prefix=ACCESS_LOGS_PREFIX)
        explicit_bucket_policy(self.bucket)
        self.object_key = f"{RUNTIME_PREFIX}{self.asset.s3_object_key}"
        log_group = deployment_log_group(stack, DEPLOYMENT_LOGS_ID,
                                         description=f"{stack.stack_name}: logs of the node runtime deployment")
        role = deployment_role(
            stack, DEPLOYMENT_ROLE_ID,
            description="fmcluster: CDK BucketDeployment handler that copies the node runtime into its bucket",
            log_group=log_group,
        )
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Deploy",
            sources=[s3deploy.Source.bucket(self.asset.bucket, self.asset.s3_object_key)],
            destination_bucket=self.bucket,
            destination_key_prefix=RUNTIME_PREFIX,
            extract=False,
            prune=False,  # older runtimes stay for instances launched from older launch-template versions
            role=role.without_policy_updates(),
            log_group=log_group,
        )
        grant_destination(role, self.bucket, RUNTIME_PREFIX)
        acknowledge_deployment_handler(stack)

    def required_by(self, *dependents: Construct) -> None:
        """Make `dependents` (launch templates, clusters) wait for the runtime's copy: a node launched before it
        would find no runtime to fetch."""
        for dependent in dependents:
            dependent.node.add_dependency(self.deployment)

    @property
    def s3_url(self) -> str:
        return f"s3://{self.bucket.bucket_name}/{self.object_key}"

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """s3:GetObject on this runtime's object only."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:GetObject"], resource_arns=[self.bucket.arn_for_objects(self.object_key)])


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


def mount_step(*, dns_name: str, mount_name: str, mount_point: str, efa: bool, fatal: bool = False) -> str:
    """Shell lines that mount FSx for Lustre (and add it to fstab) with the runtime's mount helper.

    A failed mount is judged by validation.policy (docs/node-contract.md): where the boot validator runs, its
    required storage.mounts check applies the policy, so the step only reports; `fatal` (nodes without the
    validator, under policy fail) stops the boot here."""
    flags = " --efa" if efa else ""
    on_failure = ("{ echo 'fmcluster: FSx for Lustre mount failed (details above); policy fail'; exit 1; }" if fatal
                  else "echo 'fmcluster: FSx for Lustre mount failed (details above)'")
    return (
        "PYTHONPATH=/opt/fmcluster/pkg python3 -m fmcluster.runtime.lustre mount "
        f"--dns-name {quote(dns_name)} --mount-name {quote(mount_name)} --mount-point {quote(mount_point)}{flags} "
        f"--fstab || {on_failure}\n"
    )


def _fetch_runtime(runtime_s3_url: str, region: str) -> str:
    """Shell lines that fetch the runtime asset (retrying with backoff) and unpack it as a package."""
    return f"""install -d -m 0755 /etc/fmcluster /opt/fmcluster/pkg/fmcluster /var/log/fmcluster
exec >>/var/log/fmcluster/user-data.log 2>&1
for attempt in 1 2 3 4 5 6; do
  aws s3 cp --only-show-errors --region {quote(region)} {quote(runtime_s3_url)} /opt/fmcluster/runtime.zip && break
  [ "$attempt" -eq 6 ] && {{ echo "cannot fetch the fmcluster runtime"; exit 1; }}
  sleep $((attempt * 10))
done
rm -rf /opt/fmcluster/pkg/fmcluster/runtime
python3 -m zipfile -e /opt/fmcluster/runtime.zip /opt/fmcluster/pkg/fmcluster/runtime
touch /opt/fmcluster/pkg/fmcluster/__init__.py
"""


def bootstrap_script(
    *,
    runtime_s3_url: str,
    region: str,
    profile_json: str,
    level: str,
    policy: str,
    collectors: str = "",
    mount: str = "",
    after_units: Sequence[str] = (),
) -> str:
    """The shell part of the user data: fetch and unpack the runtime, write the profile,
    mount shared storage and install collectors (when given), run the shared bootstrap. Network steps retry with backoff.

    With `after_units` the user data runs none of the steps after the profile itself: it writes them to
    `BOOT_VALIDATION_SCRIPT` and starts that as the systemd unit `BOOT_VALIDATION_UNIT`, ordered after those units
    (`deferred_validation`), for images whose node agent and local disks come up only after cloud-init's user data."""
    head = f"""#!/bin/bash
set -euo pipefail
{_fetch_runtime(runtime_s3_url, region)}cat >/etc/fmcluster/profile.json <<'FMCLUSTER_PROFILE'
{profile_json}
FMCLUSTER_PROFILE
"""
    run = (f"FMCLUSTER_LEVEL={quote(level)} FMCLUSTER_POLICY={quote(policy)} \\\n"
           "  bash /opt/fmcluster/pkg/fmcluster/runtime/node_bootstrap.sh\n")
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


def login_script(*, runtime_s3_url: str, region: str, mount: str, collectors: str = "") -> str:
    """A login node's user data: no GPU to validate, but the shared file system users expect, and the
    collectors when given (the login node is where a managed Slurm's node states can be read)."""
    return f"""#!/bin/bash
set -euo pipefail
{_fetch_runtime(runtime_s3_url, region)}{mount}{collectors}echo 'fmcluster login node' >/etc/motd.d/fmcluster 2>/dev/null || true
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

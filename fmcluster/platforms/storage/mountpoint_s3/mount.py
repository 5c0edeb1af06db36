"""Mountpoint for Amazon S3 as every kind mounts it: the `Mount` of a bucket (and prefix), in each form of the storage
contract that applies: boot lines (the pinned client, then an fstab entry mounted at once), the CSI driver's static
volume, the nodes' and the driver's S3 permissions.

Pure: the bucket's name and key ARN come in as strings (CDK tokens of the storage stack at synth), so tests build a
mount from plain values. HyperPod and ParallelCluster mount nothing of S3 themselves: no service form. Their nodes
run the boot lines instead: ParallelCluster's from a custom action, HyperPod's lifecycle scripts from the lifecycle
parameters' list of mounts (no lifecycle form of its own: platforms/hyperpod/mounts.py builds the entry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from fmcluster import images
from fmcluster.platforms.hyperpod.mounts import EKS_IMAGE, SLURM_IMAGE
from fmcluster.platforms.storage.forms import Arn, BootMount, KubernetesVolume, Mount, NodeClient, Permission
from fmcluster.platforms.storage.mountpoint_s3.settings import CLAIM, CSI_ADDON, STORE

MOUNT_ID = "MountpointS3"
FSTYPE = "mount-s3"  # fstab's type: mount(8) runs /sbin/mount.mount-s3 (Mountpoint 1.18+, doc/CONFIGURATION.md)
# Required in fstab (Mountpoint refuses to start without _netdev, nosuid, nodev); nofail lets a node boot without it.
FSTAB_OPTIONS = ("_netdev", "nosuid", "nodev", "nofail")
MOUNT_TIMEOUT_S = 120

# The client, pinned: Mountpoint's release packages, checked against its signing key before install
# (doc/INSTALL.md: https://github.com/awslabs/mountpoint-s3/blob/main/doc/INSTALL.md). The key's fingerprint is the one
# the install guide publishes; gpg refuses a package the key did not sign.
VERSION = "1.23.0"
RELEASES = "https://s3.amazonaws.com/mountpoint-s3-release"
KEYS_URL = f"{RELEASES}/public_keys/KEYS"
KEY_FINGERPRINT = "8AEFE705EBE329C0948C75A66F1C3B3AEF4B030B"


def install_lines(package: str, installer: str) -> str:
    """Download the architecture's package and its signature; install it only where gpg says the pinned key (by its
    fingerprint, whatever else KEYS holds) made a valid signature. Every download and the install run under a timeout;
    a failure leaves the mount to fail and say so."""
    url = f"{RELEASES}/{VERSION}/$(uname -m | sed s/aarch64/arm64/)/mount-s3-{VERSION}-$(uname -m | sed s/aarch64/arm64/)"
    # one && chain: set -e does not apply inside a subshell whose status || tests
    steps = [
        "d=$(mktemp -d)", "cd \"$d\"",
        f"timeout 120 curl -fsSL --retry 5 -o KEYS {KEYS_URL}",
        f"timeout 120 curl -fsSL --retry 5 -o p.{package} {url}.{package}",
        f"timeout 120 curl -fsSL --retry 5 -o p.{package}.asc {url}.{package}.asc",
        "export GNUPGHOME=\"$d/g\"", "mkdir -m 700 g", "timeout 60 gpg -q --import KEYS",
        f"timeout 60 gpg --status-fd 1 --verify p.{package}.asc p.{package} 2>/dev/null "
        f"| grep -q '^\\[GNUPG:\\] VALIDSIG .*{KEY_FINGERPRINT}'",
        f"timeout 600 {installer} ./p.{package}",
    ]
    return (f"if ! command -v mount-s3 >/dev/null; then ( {' && '.join(steps)} ) "
            f"|| echo 'fmcluster: mount-s3 {VERSION} install failed'; fi\n")


RPM = install_lines("rpm", "dnf install -y -q")
# apt resolves the package's dependencies (libfuse2) from the image's lists, refreshed first
DEB = install_lines("deb", "env DEBIAN_FRONTEND=noninteractive apt-get update -q && timeout 600 env "
                           "DEBIAN_FRONTEND=noninteractive apt-get install -y -q")
# Operating systems as ParallelCluster's Image.Os names them (its kind's nodes run the boot lines from a custom
# action): Mountpoint publishes the RPM for Amazon Linux, RHEL and its rebuilds, the DEB for Ubuntu (doc/INSTALL.md).
OPERATING_SYSTEMS = {"alinux2023": RPM, "ubuntu2204": DEB, "ubuntu2404": DEB, "rhel8": RPM, "rocky8": RPM,
                     "rhel9": RPM, "rocky9": RPM}
# HyperPod's AMIs: Slurm's is Ubuntu (the Deep Learning Base GPU AMI's); EKS's is Amazon Linux, whose release (2 with
# yum, 2023 with dnf) AWS does not publish where we found, so the node uses the one it has (docs/storage.md).
HYPERPOD_IMAGES = {SLURM_IMAGE: DEB,
                   EKS_IMAGE: install_lines("rpm", "$(command -v dnf || command -v yum) install -y -q")}
CLIENT = NodeClient("mount-s3", install={
    **{family: (DEB if "ubuntu" in family else RPM) for family in images.FAMILIES},
    "eks-al2023": RPM,
    **OPERATING_SYSTEMS,
    **HYPERPOD_IMAGES,
})

DRIVER = "s3.csi.aws.com"
VOLUME = "s3"
CAPACITY_GIB = 1200  # Kubernetes requires a size; the driver ignores it


@dataclass(frozen=True)
class Bucket:
    """The bucket a mount reads: its name, whether it is a directory bucket (S3 Express One Zone), its KMS key (None:
    S3's own), and the Region to name in mount options (None: Mountpoint detects it)."""

    name: str
    directory: bool = False
    key_arn: Optional[str] = None
    region: Optional[str] = None


@dataclass(frozen=True)
class Options:
    """What the spec asks of the mount (settings.MountpointS3, as plain values)."""

    mount_point: str
    prefix: str = ""
    read_only: bool = True
    allow_overwrite: bool = False
    allow_delete: bool = False
    uid: Optional[int] = None
    gid: Optional[int] = None
    cache_directory: Optional[str] = None
    max_cache_size_mib: Optional[int] = None
    metadata_ttl_seconds: Optional[int] = None


def mountpoint_options(bucket: Bucket, o: Options) -> Tuple[str, ...]:
    """Mountpoint's options as fstab takes them (doc/CONFIGURATION.md): every --flag without its dashes, values after
    '='. allow-other: jobs run as other users than root, which mounts it at boot."""
    found = ["ro" if o.read_only else "rw", "allow-other"]
    if bucket.region:
        found.append(f"region={bucket.region}")
    if o.allow_overwrite:
        found.append("allow-overwrite")
    if o.allow_delete:
        found.append("allow-delete")
    found += [f"{name}={value}" for name, value in (("uid", o.uid), ("gid", o.gid)) if value is not None]
    if o.cache_directory:
        found.append(f"cache={o.cache_directory}")
    if o.max_cache_size_mib is not None:
        found.append(f"max-cache-size={o.max_cache_size_mib}")
    if o.metadata_ttl_seconds is not None:
        found.append(f"metadata-ttl={o.metadata_ttl_seconds}")
    return tuple(found)


def csi_options(bucket: Bucket, o: Options) -> Tuple[str, ...]:
    """The same as the CSI driver's mountOptions take them ("flag" or "flag value"): the prefix goes here (the volume
    names the bucket only); the node-local cache does not (the driver's cache is a volume attribute of its own)."""
    found = ["read-only"] if o.read_only else []
    if bucket.region:
        found.append(f"region {bucket.region}")
    if o.prefix:
        found.append(f"prefix {o.prefix}")
    found += [flag for flag, on in (("allow-overwrite", o.allow_overwrite), ("allow-delete", o.allow_delete)) if on]
    found += [f"{name} {value}" for name, value in (("uid", o.uid), ("gid", o.gid)) if value is not None]
    if o.metadata_ttl_seconds is not None:
        found.append(f"metadata-ttl {o.metadata_ttl_seconds}")
    return tuple(found)


def boot_command(source: str, o: Options, options: Tuple[str, ...]) -> str:
    """Create the mount point (and cache directory), make fstab's line for the mount point this one (a line the
    spec changed since, e.g. another prefix, is replaced; the same line is left alone), mount it unless mounted."""
    line = f"{source} {o.mount_point} {FSTYPE} {','.join(FSTAB_OPTIONS + options)} 0 0"
    dirs = " ".join(d for d in (o.mount_point, o.cache_directory) if d)
    # the spec's paths hold letters, digits, '.', '_', '-' and '/': only '.' needs escaping in sed's pattern
    ours = f"\\| {o.mount_point.replace('.', '[.]')} {FSTYPE} |d"
    fstab = (f"{{ grep -qsxF '{line}' /etc/fstab || {{ {{ [ ! -e /etc/fstab ] || sed -i '{ours}' /etc/fstab; }} "
             f"&& echo '{line}' >> /etc/fstab; }}; }}")
    return (f"mkdir -p {dirs} && {fstab} "
            f"&& {{ mountpoint -q {o.mount_point} || timeout {MOUNT_TIMEOUT_S} mount {o.mount_point}; }}")


def permissions(sid: str, bucket: Bucket, o: Options) -> Tuple[Permission, ...]:
    """Least privilege for Mountpoint on the bucket (doc/CONFIGURATION.md, "IAM permissions"): list only below the
    prefix; read, and where writable write, abort uploads and (allow-delete) delete, only objects below it; a directory
    bucket's session; the key's data keys."""
    if bucket.directory:
        # S3 Express authorizes object requests by the session (CreateSession on the bucket), for the whole bucket:
        # Mountpoint asks for no read-only session, so a read-only mount is read-only by its ro option alone
        # (doc/CONFIGURATION.md, "Directory buckets"; an access point would narrow it).
        found = [Permission(f"{sid}Session", ("s3express:CreateSession",),
                            (Arn("s3express", f"bucket/{bucket.name}"),))]
    else:
        listing = {"StringLike": {"s3:prefix": [f"{o.prefix}*"]}} if o.prefix else {}
        objects = (Arn("s3", f"{bucket.name}/{o.prefix}*", regional=False),)
        actions: List[str] = ["s3:GetObject"]
        if not o.read_only:
            actions += ["s3:AbortMultipartUpload", "s3:PutObject"]
            if o.allow_delete:
                actions.append("s3:DeleteObject")
        found = [Permission(f"{sid}List", ("s3:ListBucket",), (Arn("s3", bucket.name, regional=False),), listing),
                 Permission(f"{sid}Objects", tuple(actions), objects,
                            why=f"Mountpoint reads{'' if o.read_only else ' and writes'} the objects below the "
                                f"mounted prefix{' ' + o.prefix if o.prefix else ''} of its bucket, whatever their "
                                "keys; the object actions are named one by one.")]
    if bucket.key_arn is not None:
        key_actions = ("kms:Decrypt",) if o.read_only else ("kms:Decrypt", "kms:GenerateDataKey")
        found.append(Permission(f"{sid}Key", key_actions, (Arn("kms", bucket.key_arn, whole=True),)))
    return tuple(found)


def s3_mount(bucket: Bucket, o: Options) -> Mount:
    """The mount of a bucket (below `o.prefix`) at `o.mount_point`."""
    source = f"s3://{bucket.name}/{o.prefix}"
    options = mountpoint_options(bucket, o)
    return Mount(
        store=STORE,
        id=MOUNT_ID,
        path=o.mount_point,
        fstype=FSTYPE,
        source=source,
        options=options,
        boot=BootMount(command=boot_command(source, o, options), failure="Mountpoint for Amazon S3 mount failed "
                       f"({source} on {o.mount_point})", client=CLIENT),
        kubernetes=KubernetesVolume(
            addon=CSI_ADDON.name,
            driver=DRIVER,
            handle=f"s3-{o.mount_point.strip('/').replace('/', '-')}",
            attributes={"bucketName": bucket.name},
            mount_options=csi_options(bucket, o),
            capacity_gib=CAPACITY_GIB,
            claim=CLAIM,
            name=VOLUME,
            driver_permissions=permissions("MountpointCsi", bucket, o),
        ),
        node_permissions=permissions("MountpointS3", bucket, o),
    )

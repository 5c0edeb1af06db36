"""The forms of a store's mount (`Mount`), as every orchestrator kind consumes them, and what a store's build hands
the storage stack (`BuiltStore`): the storage contract's synth-time half (fmcluster/platforms/storage/__init__.py
says what each form is for). Apart from the declarations there so that reading a spec (`validate`, `plan`) never
builds these classes: only the stacks, the stores' mounts and their tests load them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Tuple

from fmcluster.platforms.storage.services import SERVICES

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_s3 as s3
    from constructs import Construct

    from fmcluster.spec.cluster import ClusterSpec

__all__ = ["Alarm", "Arn", "BootMount", "BuiltStore", "Judgement", "KubernetesVolume", "Mount", "NodeClient",
           "Permission", "S3Link", "StorageScope"]

ID = re.compile(r"^[A-Z][A-Za-z0-9]*$")


@dataclass(frozen=True)
class Arn:
    """An ARN a consumer completes with its own stack's partition (and Region and account where regional), or a whole
    ARN as it is (`whole`, e.g. a key ARN the spec gives or another stack exports)."""

    service: str
    resource: str
    regional: bool = True
    whole: bool = False

    def render(self, *, partition: str, region: str, account: str) -> str:
        if self.whole:
            return self.resource
        if self.regional:
            return f"arn:{partition}:{self.service}:{region}:{account}:{self.resource}"
        return f"arn:{partition}:{self.service}:::{self.resource}"


@dataclass(frozen=True)
class Permission:
    """One IAM statement a store needs granted: actions named one by one, on the resources it names, under its
    ``conditions`` (IAM's operator -> key -> value, e.g. ``{"StringLike": {"s3:prefix": ["data/*"]}}``)."""

    sid: str
    actions: Tuple[str, ...]
    resources: Tuple[Arn, ...]
    conditions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    why: str = ""  # why a resource has a wildcard (objects below a prefix): the consumer's cdk-nag acknowledgment

    def __post_init__(self) -> None:
        if not self.actions or any("*" in a for a in self.actions):
            raise ValueError(f"actions: {self.sid} names its actions one by one, never a wildcard")
        if self.wildcards and not self.why:
            raise ValueError(f"why: {self.sid} has a wildcard resource; say why it needs one")

    @property
    def wildcards(self) -> bool:
        return any("*" in a.resource for a in self.resources)

    def arns(self, *, partition: str, region: str, account: str) -> List[str]:
        return [a.render(partition=partition, region=region, account=account) for a in self.resources]


@dataclass(frozen=True)
class NodeClient:
    """The client a node needs to mount a store.

    :param install: image -> shell lines that install the client on that image ("" where the image ships it). An
        image is an image family (``images.FAMILIES``) or the name a kind gives the image its service picks (the
        EKS kind's ``eks-al2023``). An image not listed is refused at synth, naming the store's client.
    """

    name: str
    install: Mapping[str, str]

    def install_on(self, image: str) -> str:
        if image not in self.install:
            raise ValueError(f"image: no way to install {self.name} on {image!r} (known: {', '.join(sorted(self.install))})")
        return self.install[image]


@dataclass(frozen=True)
class BootMount:
    """How a node's boot script mounts the store.

    :param command: one shell command that mounts the store and adds it to fstab.
    :param failure: what the boot log says when it fails (no single quotes).
    :param client: the client it needs, installed first where the image lacks it.
    :param efa_command: the command on a node with an EFA interface, where the store is reached over EFA (None: the
        same command).
    """

    command: str
    failure: str
    client: Optional[NodeClient] = None
    efa_command: Optional[str] = None

    def __post_init__(self) -> None:
        if "'" in self.failure or "\n" in self.failure:
            raise ValueError("failure: one line without single quotes (the boot script echoes it quoted)")

    def script(self, *, image: str, efa: bool = False) -> str:
        """The client's install, then the mount, as one script whose exit status is the mount's: for a caller that
        judges a failure itself (HyperPod's lifecycle scripts)."""
        command = self.efa_command if efa and self.efa_command is not None else self.command
        client = self.client.install_on(image) if self.client is not None else ""
        return f"{client}{command}\n"

    def shell(self, *, image: str, efa: bool = False, fatal_under_fail: bool = False) -> str:
        """Shell lines: the client's install, then the mount. A failed mount is judged by validation.policy
        (docs/node-contract.md): where the boot validator runs, its required storage.mounts check applies the policy,
        so the line only reports; with `fatal_under_fail` (nodes without the validator) it stops the boot when the
        policy the boot pointer named (``FMCLUSTER_POLICY``) is fail, read at boot so a policy change leaves the
        launch template alone."""
        said = f"echo 'fmcluster: {self.failure}'"
        on_failure = ("{ " + said + "; if [ \"${FMCLUSTER_POLICY:-fail}\" = fail ]; then echo 'fmcluster: policy "
                      "fail'; exit 1; fi; }") if fatal_under_fail else said
        return f"{self.script(image=image, efa=efa)[:-1]} || {on_failure}\n"


@dataclass(frozen=True)
class KubernetesVolume:
    """A store as a static PersistentVolume (retained: the storage stack owns the data) pre-bound to a ReadWriteMany
    claim in a namespace, served by the CSI driver of the `CsiAddon` named ``addon``.

    :param name: the volume's name after the cluster's (``<cluster>-<name>``).
    :param claim: the claim pods mount.
    :param capacity_gib: what the volume and claim say (Kubernetes requires a size; a driver may ignore it).
    :param driver_permissions: what the driver's role needs for this volume.
    """

    addon: str
    driver: str
    handle: str
    attributes: Mapping[str, str]
    mount_options: Tuple[str, ...]
    capacity_gib: int
    claim: str
    name: str
    driver_permissions: Tuple[Permission, ...] = ()


@dataclass(frozen=True)
class Mount:
    """One configured store as every kind mounts it.

    :param store: the store's name (messages only: a kind never branches on it).
    :param id: a construct id part for what a kind builds per mount (a volume manifest), stable across releases.
    :param path: where nodes see it; ``fstype``, ``source`` and ``options`` as mount(8) takes them.
    """

    store: str
    id: str
    path: str
    fstype: str
    source: str
    options: Tuple[str, ...] = ()
    boot: Optional[BootMount] = None
    kubernetes: Optional[KubernetesVolume] = None
    services: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    lifecycle: Optional[Mapping[str, Any]] = None
    node_permissions: Tuple[Permission, ...] = ()

    def __post_init__(self) -> None:
        if not ID.match(self.id):
            raise ValueError(f"id: {self.id!r} must be a construct id (a capital letter, then letters and digits)")
        if not self.path.startswith("/") or self.path == "/":
            raise ValueError(f"path: {self.path!r} must be an absolute path below /")
        unknown = set(self.services) - set(SERVICES)
        if unknown:
            raise ValueError(f"services: {', '.join(sorted(unknown))} not among {', '.join(SERVICES)}")

    @property
    def command(self) -> str:
        """The mount(8) command a person runs."""
        options = f" -o {','.join(self.options)}" if self.options else ""
        return f"mount -t {self.fstype}{options} {self.source} {self.path}"


@dataclass(frozen=True)
class Alarm:
    """A CloudWatch alarm on a store's metric that notifies the alert topic (observability stack)."""

    id: str
    description: str
    namespace: str
    metric: str
    dimensions: Mapping[str, str]
    statistic: str
    period_minutes: int
    threshold: float
    evaluation_periods: int
    below: bool = True  # alarm while the metric is below the threshold (else above)


@dataclass(frozen=True)
class BuiltStore:
    """What a store's `build` returns to the storage stack.

    :param outputs: CfnOutput id -> value, added to the storage stack.
    :param exports: values exported under CDK's automatic names whatever the kind imports, so the exports never depend
        on the orchestrator (CloudFormation refuses to remove an export another stack imports).
    :param alarms: added to the observability stack when there is one.
    """

    mount: Mount
    outputs: Mapping[str, str] = field(default_factory=dict)
    exports: Tuple[str, ...] = ()
    alarms: Tuple[Alarm, ...] = ()


@dataclass(frozen=True)
class StorageScope:
    """What a store builds from, in the storage stack.

    :param scope: the storage stack itself: a store's resources keep the construct ids (and logical ids) they had.
    :param subnet: the storage subnet in the GPU AZ (never resized with compute).
    :param node_security_group: the nodes' EFA security group.
    :param key: the data key (``Store.uses_data_key``).
    :param data_bucket_name: the data bucket's name (a token for the bucket fmcluster creates).
    :param log_bucket: the data bucket's access-log bucket (None where the data bucket is an existing one), where a
        store's own buckets deliver their access logs.
    """

    scope: Construct
    spec: ClusterSpec
    vpc: ec2.IVpc
    subnet: ec2.ISubnet
    node_security_group: ec2.ISecurityGroup
    key: kms.IKey
    data_bucket_name: str
    log_bucket: Optional[s3.IBucket] = None


@dataclass(frozen=True)
class S3Link:
    """A directory of a store linked to an S3 prefix, as the nodes see it: what lands in `s3` appears at `node_path`
    on the events in `auto_import`, and what is written there reaches `s3` on those in `auto_export`."""

    node_path: str
    s3: str
    auto_import: Tuple[str, ...] = ()
    auto_export: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Judgement:
    """What a store says a change to one of its resources does, with the pages that say so: ``data`` (the data is at
    stake) or else the store's availability to the cluster; ``fails`` where the service refuses the change and the
    stack rolls back."""

    text: str
    sources: Tuple[str, ...] = ()
    data: bool = False
    fails: bool = False

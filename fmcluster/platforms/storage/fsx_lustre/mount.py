"""FSx for Lustre as every kind mounts it: the `Mount` of a file system, in each form of the storage contract.

Pure: the file system's id, DNS name and mount name come in as strings (CDK tokens of the storage stack at synth),
so tests build a mount from plain values.
"""

from __future__ import annotations

from shlex import quote
from typing import Any, Dict

from fmcluster import images
from fmcluster.platforms.storage import HYPERPOD, HYPERPOD_INFERENCE, PARALLELCLUSTER
from fmcluster.platforms.storage.forms import Alarm, Arn, BootMount, KubernetesVolume, Mount, NodeClient, Permission
from fmcluster.platforms.storage.fsx_lustre.settings import CLAIM, CSI_ADDON, STORE

# The construct id part of what a kind builds per FSx mount (the volume manifest of a Kubernetes kind): kept from
# the releases before the storage seam, so deployed manifests update in place.
MOUNT_ID = "SharedFileSystem"
OPTIONS = ("noatime", "flock")

# FSx CSI driver, static provisioning: volumeHandle is the file system id, volumeAttributes its DNS and mount names.
# https://github.com/kubernetes-sigs/aws-fsx-csi-driver/tree/master/examples/kubernetes/static_provisioning
DRIVER = "fsx.csi.aws.com"
VOLUME = "fsx"  # the PersistentVolume is <cluster>-fsx

# ParallelCluster's SharedStorage entry name for the file system.
SHARED_STORAGE_NAME = "fsx"

# The Lustre client on images that lack it: the EKS-optimized Amazon Linux 2023 AMI (FSx user guide, "Installing the
# Lustre client", Amazon Linux 2023). Every Deep Learning AMI family ships the client.
EKS_AL2023_INSTALL = ("lustre=no\nfor i in 1 2 3 4 5; do timeout 300 dnf install -y -q lustre-client && { lustre=yes; "
                      "break; }; sleep $((i * 10)); done\n"
                      "[ \"$lustre\" = yes ] || echo 'fmcluster: lustre-client install failed'\n")
CLIENT = NodeClient("lustre-client", install={**{family: "" for family in images.FAMILIES},
                                              "eks-al2023": EKS_AL2023_INSTALL})
FAILURE = "FSx for Lustre mount failed (details above)"
# The free-capacity alarm: below this share of the capacity (the FsxFreeCapacityLow rule covers the clients' view).
FREE_CAPACITY_RATIO = 0.1


def boot_command(*, dns_name: str, mount_name: str, mount_point: str, efa: bool) -> str:
    """The runtime's mount helper: mounts (over EFA with `efa`) and adds the file system to fstab."""
    return ("PYTHONPATH=/opt/fmcluster/pkg python3 -m fmcluster.runtime.lustre mount "
            f"--dns-name {quote(dns_name)} --mount-name {quote(mount_name)} --mount-point {quote(mount_point)}"
            f"{' --efa' if efa else ''} --fstab")


def inference_source(*, file_system_id: str, dns_name: str, mount_name: str) -> Dict[str, Any]:
    """The HyperPod Inference Operator's model source on the file system (its CRD's modelSourceConfig, the model's
    directory aside): the operator mounts it in the model's pods by id, DNS and mount names."""
    return {"modelSourceType": "fsx",
            "fsxStorage": {"fileSystemId": file_system_id, "dnsName": dns_name, "mountName": mount_name}}


def lustre_mount(*, file_system_id: str, dns_name: str, mount_name: str, mount_point: str, efa: bool,
                 capacity_gib: int) -> Mount:
    """The mount of an FSx for Lustre file system. An EFA-enabled one is reached over EFA from nodes with an EFA
    interface, which only fmcluster's mount helper sets up (LNet over EFA): HyperPod then leaves the mount to the
    nodes (no HyperPod form), and ParallelCluster, whose SharedStorage has no EFA client setting, mounts it over TCP
    (the spec refuses the combination: orchestrators/parallelcluster/settings.py)."""
    services = {PARALLELCLUSTER: {"MountDir": mount_point, "Name": SHARED_STORAGE_NAME, "StorageType": "FsxLustre",
                                  "FsxLustreSettings": {"FileSystemId": file_system_id}},
                HYPERPOD_INFERENCE: inference_source(file_system_id=file_system_id, dns_name=dns_name,
                                                     mount_name=mount_name)}
    if not efa:
        services[HYPERPOD] = {"FsxLustreConfig": {"DnsName": dns_name, "MountName": mount_name, "MountPath": mount_point}}
    return Mount(
        store=STORE,
        id=MOUNT_ID,
        path=mount_point,
        fstype="lustre",
        source=f"{dns_name}@tcp:/{mount_name}",
        options=OPTIONS,
        boot=BootMount(
            command=boot_command(dns_name=dns_name, mount_name=mount_name, mount_point=mount_point, efa=False),
            efa_command=boot_command(dns_name=dns_name, mount_name=mount_name, mount_point=mount_point, efa=True)
            if efa else None,
            failure=FAILURE,
            client=CLIENT,
        ),
        kubernetes=KubernetesVolume(
            addon=CSI_ADDON.name,
            driver=DRIVER,
            handle=file_system_id,
            attributes={"dnsname": dns_name, "mountname": mount_name},
            mount_options=OPTIONS,
            capacity_gib=capacity_gib,
            claim=CLAIM,
            name=VOLUME,
            # The driver serves static volumes only (the storage stack owns the file system): its controller
            # provisions nothing, so its role may only describe the file system (dynamic provisioning would need the
            # driver's documented policy).
            driver_permissions=(Permission("DescribeTheClusterFileSystem", ("fsx:DescribeFileSystems",),
                                           (Arn("fsx", f"file-system/{file_system_id}"),)),),
        ),
        services=services,
        lifecycle={"dns_name": dns_name, "mount_name": mount_name, "mount_point": mount_point, "efa": efa},
    )


def free_capacity_alarm(*, file_system_id: str, capacity_gib: int, ratio: float = FREE_CAPACITY_RATIO,
                        id: str = "FsxFreeCapacityAlarm") -> Alarm:
    """The file servers' view of free space: AMP cannot read CloudWatch metrics, so it is a CloudWatch alarm on
    ``FreeDataStorageCapacity``; the ``FsxFreeCapacityLow`` rule covers the same from the clients' view
    (node_exporter statfs)."""
    return Alarm(
        id=id,
        description=(f"FSx for Lustre {file_system_id}: less than {ratio:.0%} free. Runbook: free data or raise the "
                     "storage capacity (aws fsx update-file-system --storage-capacity)."),
        namespace="AWS/FSx",
        metric="FreeDataStorageCapacity",
        dimensions={"FileSystemId": file_system_id},
        statistic="Minimum",
        period_minutes=5,
        threshold=capacity_gib * 1024**3 * ratio,
        evaluation_periods=3,
    )

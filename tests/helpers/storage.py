"""The storage contract's `Mounts` as the cluster stack hands them to a kind, from plain values (no synth)."""

from __future__ import annotations

from fmcluster.platforms.storage import Mounts
from fmcluster.platforms.storage.forms import BootMount, Mount, NodeClient
from fmcluster.platforms.storage.fsx_lustre import STORE as FSX
from fmcluster.platforms.storage.fsx_lustre.mount import lustre_mount
from fmcluster.registry import stores


def fsx_mounts(*, dns_name: str = "fs-0abc.fsx.us-east-1.amazonaws.com", mount_name: str = "abcdefgh",
               mount_point: str = "/fsx", efa: bool = False, file_system_id: str = "fs-0123456789abcdef0",
               capacity_gib: int = 1200) -> Mounts:
    """Every registered store, and one FSx for Lustre file system mounted."""
    assert FSX in stores()
    return Mounts(stores=tuple(stores()), mounts=(lustre_mount(
        file_system_id=file_system_id, dns_name=dns_name, mount_name=mount_name, mount_point=mount_point, efa=efa,
        capacity_gib=capacity_gib),))


def no_mounts() -> Mounts:
    """Every registered store, none configured."""
    return Mounts(stores=tuple(stores()))


def with_boot_only_store(mounts: Mounts, images) -> Mounts:
    """`mounts` and one more: a store as Mountpoint for Amazon S3 is to HyperPod (its own tests hold its lines): boot
    lines with a client for each of `images`, no lifecycle form."""
    s3 = Mount(store="mountpoint-s3", id="MountpointS3", path="/s3", fstype="mount-s3", source="s3://datasets/corpus/",
               boot=BootMount(command="mkdir -p /s3 && timeout 120 mount /s3",
                              failure="Mountpoint for Amazon S3 mount failed (s3://datasets/corpus/ on /s3)",
                              client=NodeClient("mount-s3", install={i: f"install-on-{i}\n" for i in images})))
    return Mounts(stores=mounts.stores, mounts=(*mounts.mounts, s3))

"""The node-local NVMe tier as data (`NVME`): its name, the one path every kind mounts it at, its size per node from
the instance catalog, and the write and read rates the planner prices it with.

Every kind's GPU nodes with instance store have it at `NVME.path`: the Deep Learning AMI (none, pcs, HyperPod) and
ParallelCluster's ``EphemeralVolume`` mount it there, and EKS nodes bind-mount a directory of nodeadm's array there
(orchestrators/eks/node_groups.py). The path itself is the node contract's (runtime/contract.py), which the node-side
code reads without this module. docs/storage.md ("Node-local NVMe") has the sources.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Optional, Tuple

from fmcluster.catalog import InstanceType
from fmcluster.runtime.contract import INSTANCE_NVME_ROOT

RAID0 = "RAID0"


@dataclass(frozen=True)
class NodeSize:
    """The tier on one node of a type: ``gb`` in all (GB = 10^9 bytes, as DescribeInstanceTypes), over ``disks``
    disks assembled as ``layout`` (a single disk is mounted as it is). ``verified``: the catalog's figure has a
    source."""

    gb: int
    disks: int
    layout: str
    verified: bool

    @property
    def bytes(self) -> float:
        return self.gb * 1e9


@dataclass(frozen=True)
class NodeLocalTier:
    """A node-local tier: the same path on every node, a size each node's type decides, lost with the node.

    :param name: how checkpoint tiers and the planner name it (``checkpoints.tier``).
    :param title: how reports name it.
    :param path: where every kind's nodes mount it.
    :param write_mbps_per_disk, read_mbps_per_disk: sequential MB/s (10^6 bytes) per disk the planner takes.
    :param rates_unverified: AWS publishes no such rate: the figures are bounds, so times from them are lower bounds.
    :param rates_basis: where the rates come from.
    """

    name: str
    title: str
    path: str
    write_mbps_per_disk: float
    read_mbps_per_disk: float
    rates_unverified: bool
    rates_basis: Tuple[str, ...]

    def size(self, instance: InstanceType) -> Optional[NodeSize]:
        """The tier on a node of `instance`, or None where the type has no instance store (or the catalog does not
        know it)."""
        if not instance.nvme_gb or not instance.nvme_disks:
            return None
        return NodeSize(instance.nvme_gb, instance.nvme_disks, RAID0 if instance.nvme_disks > 1 else "one disk",
                        instance.is_verified("nvme_gb"))

    def below(self, directory: str) -> str:
        """`directory` (absolute, as the spec's checkpoint directory) below the tier's path."""
        return posixpath.join(self.path, directory.lstrip("/"))


NVME = NodeLocalTier(
    name="nvme",
    title="instance NVMe",
    path=INSTANCE_NVME_ROOT,
    write_mbps_per_disk=4000,
    read_mbps_per_disk=7000,
    rates_unverified=True,
    rates_basis=(
        "AWS publishes instance-store IOPS, not sequential MB/s, for P5/P6 disks; a PCIe 4.0 x4 NVMe link carries at "
        "most about 7.9 GB/s (16 GT/s x 4 lanes, 128b/130b; PCI-SIG PCI Express Base Specification 4.0), and 7,000 MB/s "
        "read and 4,000 MB/s write per disk is an optimistic envelope of current data-centre NVMe drives: measure with "
        "fio on a node and replace these.",
    ),
)

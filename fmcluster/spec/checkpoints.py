"""The spec's `checkpoints` section: where training jobs write checkpoints and how often, so the example jobs, the
deployed cluster and `fmcluster plan` agree on one choice (docs/checkpoints.md).

Tiers:

- ``fsx``: every rank writes its shard to the shared FSx for Lustre file system, below ``storage.fsx.mount_point``;
  a data repository association with automatic export copies each new checkpoint to S3.
- ``nvme``: every node writes its shards to its instance-store NVMe (the RAID0 the image or the orchestrator mounts),
  then copies the finished checkpoint to FSx. The local copy is lost with the node, so a replaced node restores from
  FSx: the tier needs FSx.
- ``managed``: SageMaker HyperPod managed tiered checkpointing keeps checkpoints in a share of every node's CPU memory
  (``TieredStorageConfig`` of ``AWS::SageMaker::Cluster``), replicated to neighbouring nodes, and persists them to S3
  (a prefix of the cluster's data bucket). Only the orchestrator kinds that build a HyperPod cluster on EKS honour it;
  the others refuse it in their spec rules with `refused` below.
- ``s3``: every rank writes its shard straight to the shared store whose section offers the tier (Mountpoint for
  Amazon S3's ``storage.mountpoint_s3``, writable), below its mount point: durable in S3 once each file is closed. The
  store says what it cannot do for checkpoints (`StoreSettings.checkpoint_problems`); every kind that mounts the store
  honours it.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, FrozenSet, List, Literal, Optional, Tuple

from pydantic import Field, field_validator

from fmcluster.platforms.storage.instance_nvme.tier import NVME
from fmcluster.spec.base import Problem, SpecModel

TIERS = ("fsx", "nvme", "managed", "s3")
Tier = Literal["fsx", "nvme", "managed", "s3"]
# Tiers a store section provides (`StoreSettings.checkpoint_tier`) rather than FSx, the NVMe or a service.
STORE_TIERS = frozenset({"s3"})
# InstanceMemoryAllocationPercentage: the API takes 0-100 (SageMaker API reference, ClusterTieredStorageConfig), the
# setup guide says "The range is 20-100" ("Set up managed tier checkpointing", Step 1); the spec takes the narrower.
MANAGED_MEMORY_PERCENT = (20, 100)
MANAGED_SETUP_URL = "https://docs.aws.amazon.com/sagemaker/latest/dg/managed-tier-checkpointing-setup.html"
# Why a kind that builds no HyperPod cluster on EKS cannot honour tier managed, for its spec rules.
MANAGED_NEEDS_HYPERPOD_EKS = (
    "managed tiered checkpointing is a feature of SageMaker HyperPod clusters orchestrated by Amazon EKS "
    f"(TieredStorageConfig on AWS::SageMaker::Cluster; prerequisites in {MANAGED_SETUP_URL}: an Amazon EKS "
    "HyperPod cluster)")
EVENTS_THAT_EXPORT_A_NEW_CHECKPOINT = "NEW"
# The tiers a kind honours unless it declares others (`OrchestratorTraits.storage.checkpoint_tiers`): a tier a kind's service
# provides (managed) is refused by every kind that does not say it takes it.
DEFAULT_TIERS = frozenset({"fsx", "nvme", "s3"})
# Why a kind that does not declare a tier cannot honour it, unless the kind says why itself (`checkpoint_tier_note`).
NOT_HONOURED = {"managed": MANAGED_NEEDS_HYPERPOD_EKS}


class Checkpoints(SpecModel):
    """Where training jobs write checkpoints, how often, and how many complete ones the resume helper keeps."""

    tier: Tier = Field(description="fsx (shared Lustre, exported to S3), nvme (instance-store NVMe, copied to FSx), "
                                   "managed (HyperPod on EKS managed tiered checkpointing: CPU memory, then S3) or s3 "
                                   "(straight to the writable Mountpoint for Amazon S3 mount, storage.mountpoint_s3).")
    directory: str = Field(
        "/checkpoints",
        description="fsx and nvme: the directory below the FSx mount point (and below the instance NVMe for nvme); "
                    "s3: the directory below the store's mount point; managed: the prefix in the cluster's data bucket "
                    "the checkpoints persist to.")
    interval_minutes: int = Field(30, ge=1, le=10080,
                                  description="Minutes of training between checkpoints (what `plan` prices).")
    keep: int = Field(3, ge=1, le=1000, description="Complete checkpoints the resume helper keeps on each tier.")
    export_to_s3: bool = Field(
        True, description="fsx and nvme: a data repository association with auto_export NEW must cover directory, "
                          "so every checkpoint reaches S3 as well.")
    memory_percent: Optional[int] = Field(
        None, ge=MANAGED_MEMORY_PERCENT[0], le=MANAGED_MEMORY_PERCENT[1],
        description="managed only (required there): the share of each node's memory HyperPod sets aside for "
                    "checkpoints (InstanceMemoryAllocationPercentage, 20-100).")

    @field_validator("directory")
    @classmethod
    def _directory(cls, v: str) -> str:
        v = v.rstrip("/")
        if not re.fullmatch(r"(/[A-Za-z0-9._-]+)+", v) or posixpath.normpath(v) != v or "/." in v:
            raise ValueError(f"{v!r} is not an absolute, normalized directory of letters, digits, '.', '_' and '-' "
                             "such as /checkpoints")
        return v


@dataclass(frozen=True)
class CheckpointPaths:
    """Where a spec's checkpoints live, as the nodes see them.

    :param tier: the spec's tier.
    :param durable: the shared directory every node restores from (fsx, nvme), or the S3 prefix ``s3://<data
        bucket>/<prefix>`` as a template (managed: the bucket name is known at deploy only).
    :param local: nvme only: the directory on every node's instance NVMe, below the tier's declared path (the same on
        every kind: platforms/storage/instance_nvme/tier.py).
    """

    tier: str
    durable: str
    local: Optional[str] = None


def paths(spec: Any) -> Optional[CheckpointPaths]:
    """The checkpoint locations of `spec` (a ClusterSpec; typed Any because spec.cluster imports this module), or
    None when it has no `checkpoints` section."""
    ck = spec.checkpoints
    if ck is None:
        return None
    if ck.tier == "managed":
        return CheckpointPaths("managed", f"s3://<data bucket>{ck.directory}/")
    if ck.tier in STORE_TIERS:
        store = tier_store(spec)
        assert store is not None, "the section's rules require a store offering the tier"
        return CheckpointPaths(ck.tier, store[1].mount_point.rstrip("/") + ck.directory)
    assert spec.storage.fsx is not None, "the section's rules require storage.fsx"
    durable = spec.storage.fsx.mount_point.rstrip("/") + ck.directory
    return CheckpointPaths(ck.tier, durable, NVME.below(ck.directory) if ck.tier == NVME.name else None)


def problems(spec: Any) -> List[Problem]:
    """What the section needs of the rest of the spec, whatever the orchestrator (field paths from the top)."""
    ck = spec.checkpoints
    if ck is None:
        return []
    found: List[Problem] = []
    if ck.tier == "managed":
        if ck.memory_percent is None:
            found.append(("checkpoints.memory_percent", "tier managed needs the share of each node's memory HyperPod "
                          f"sets aside for checkpoints: {MANAGED_MEMORY_PERCENT[0]}-{MANAGED_MEMORY_PERCENT[1]} "
                          f"({MANAGED_SETUP_URL})"))
        return found
    if ck.memory_percent is not None:
        found.append(("checkpoints.memory_percent", f"applies to tier managed only, not {ck.tier}; leave it out"))
    if ck.tier in STORE_TIERS:
        return found + _store_problems(spec)
    fsx = spec.storage.fsx
    if fsx is None:
        why = ("the checkpoints live on it" if ck.tier == "fsx" else
               "the instance NVMe is lost with its node, so a replaced node restores from the copy on FSx")
        found.append(("checkpoints.tier", f"{ck.tier} needs storage.fsx: {why}"))
        return found
    if ck.tier == "nvme":
        for i, g in enumerate(spec.node_groups):
            if g.role == "gpu" and NVME.size(g.instance) is None:
                found.append((f"node_groups[{i}].instance_type", f"checkpoints.tier nvme needs instance-store NVMe; "
                              f"{g.instance_type} has none (EC2 instance types reference): use tier fsx"))
    if ck.export_to_s3 and not any(_exports(d.file_system_path, d.auto_export, ck.directory)
                                   for d in fsx.data_repository_associations):
        found.append(("checkpoints.export_to_s3", f"no data repository association exports {ck.directory} to S3: add "
                      f"storage.fsx.data_repository_associations entry {{file_system_path: {ck.directory}, "
                      "data_bucket_prefix: checkpoints/, auto_import: [], auto_export: [NEW, CHANGED]}, or set "
                      "export_to_s3: false"))
    return found


def store_offering(spec: Any, tier: str) -> Optional[Tuple[str, Any]]:
    """(key, section) of the store section the spec gives that offers checkpoint `tier`, or None."""
    return next(((k, s) for k, s in spec.storage.store_sections() if s.checkpoint_tier == tier), None)


def tier_store(spec: Any) -> Optional[Tuple[str, Any]]:
    """(key, section) of the store section that offers the spec's checkpoint tier, or None."""
    return store_offering(spec, spec.checkpoints.tier)


def _store_problems(spec: Any) -> List[Problem]:
    ck = spec.checkpoints
    found = tier_store(spec)
    if found is None:
        offered = [f"storage.{k}" for k, s in spec.storage.store_sections() if s.checkpoint_tier is not None]
        offers = [m.checkpoint_offer or f"storage.{k}" for k, m in type(spec.storage).section_models().items()
                  if m.checkpoint_tier == ck.tier]
        return [("checkpoints.tier", f"{ck.tier} writes to the shared store section that offers it; the spec has "
                 f"none: add {' or '.join(offers) or 'a store section that offers it'}"
                 + (f" ({', '.join(offered)} offer other tiers)" if offered else ""))]
    key, section = found
    return [(f"storage.{key}.{path}" if path else f"storage.{key}", f"checkpoints.tier {ck.tier}: {msg}")
            for path, msg in section.checkpoint_problems()]


def _exports(file_system_path: str, events: List[str], directory: str) -> bool:
    """The association covers `directory` (it is the association's directory or below it) and exports new files."""
    root = file_system_path.rstrip("/") + "/"
    return EVENTS_THAT_EXPORT_A_NEW_CHECKPOINT in events and (directory + "/").startswith(root)


def refused(spec: Any, tiers: FrozenSet[str], note: str = "") -> List[Problem]:
    """The problem of a spec whose checkpoints ask for a tier its kind does not declare (`tiers`), saying why (`note`,
    or the tier's own reason) and which tiers the kind takes."""
    ck = spec.checkpoints
    if ck is None or ck.tier in tiers:
        return []
    why = note or NOT_HONOURED.get(ck.tier, f"orchestrator {spec.orchestrator.type} does not provide it")
    allowed = ", ".join(t for t in TIERS if t in tiers)
    return [("checkpoints.tier", f"orchestrator {spec.orchestrator.type} cannot honour tier {ck.tier}: {why}; "
             f"use {allowed}")]

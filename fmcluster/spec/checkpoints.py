"""The spec's `checkpoints` section: where training jobs write checkpoints and how often, so the example jobs, the
deployed cluster and `fmcluster plan` agree on one choice (docs/checkpoints.md).

Tiers:

- a store section's (`StoreSettings.checkpoint_tier`): every rank writes its shard to the store, below its mount
  point (the shared file system's tier, or Mountpoint for Amazon S3's writable mount). The store says what it cannot do
  for checkpoints (`StoreSettings.checkpoint_problems`) and, where the store is not S3, whether the checkpoints also
  reach S3 (`StoreSettings.checkpoint_export`). A kind honours every store tier: the spec refuses a section a kind
  cannot mount.
- ``nvme``: every node writes its shards to its instance-store NVMe (the RAID0 the image or the orchestrator mounts),
  then copies the finished checkpoint to the shared file system (`Storage.file_system`). The local copy is lost with
  the node, so a replaced node restores from the shared file system: the tier needs it.
- ``managed``: SageMaker HyperPod managed tiered checkpointing keeps checkpoints in a share of every node's CPU memory
  (``TieredStorageConfig`` of ``AWS::SageMaker::Cluster``), replicated to neighbouring nodes, and persists them to S3
  (a prefix of the cluster's data bucket). Only the orchestrator kinds that build a HyperPod cluster on EKS honour it;
  the others refuse it in their spec rules with `refused` below.

The tiers a spec takes are its storage model's (`tier_names`): the composition root builds the section's model with them
(`checkpoints_model`), so the schema lists them and a bad tier is refused by name.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, FrozenSet, List, Literal, Optional, Tuple, Type, cast

from pydantic import Field, create_model, field_validator

from fmcluster.platforms.storage.instance_nvme.tier import NVME
from fmcluster.spec.base import Problem, SpecModel
from fmcluster.spec.storage import Storage, StoreSettings

MANAGED = "managed"
# InstanceMemoryAllocationPercentage: the API takes 0-100 (SageMaker API reference, ClusterTieredStorageConfig), the
# setup guide says "The range is 20-100" ("Set up managed tier checkpointing", Step 1); the spec takes the narrower.
MANAGED_MEMORY_PERCENT = (20, 100)
MANAGED_SETUP_URL = "https://docs.aws.amazon.com/sagemaker/latest/dg/managed-tier-checkpointing-setup.html"
# Why a kind that builds no HyperPod cluster on EKS cannot honour tier managed, for its spec rules.
MANAGED_NEEDS_HYPERPOD_EKS = (
    "managed tiered checkpointing is a feature of SageMaker HyperPod clusters orchestrated by Amazon EKS "
    f"(TieredStorageConfig on AWS::SageMaker::Cluster; prerequisites in {MANAGED_SETUP_URL}: an Amazon EKS "
    "HyperPod cluster)")
# The tiers a kind honours besides the store sections' (`OrchestratorTraits.storage.checkpoint_tiers`): a tier a
# kind's service provides (managed) is refused by every kind that does not say it takes it.
DEFAULT_TIERS = frozenset({NVME.name})
# Why a kind that does not declare a tier cannot honour it, unless the kind says why itself (`checkpoint_tier_note`).
NOT_HONOURED = {MANAGED: MANAGED_NEEDS_HYPERPOD_EKS}
MANAGED_SUMMARY = "HyperPod on EKS managed tiered checkpointing: CPU memory, then S3"
STORES_PACKAGE = "fmcluster.platforms.storage."  # a store is a folder there; a test's toy section is not


def known_tiers() -> Tuple[str, ...]:
    """Every tier name declared now: the node-local tier, the service's, then those of the store folders' sections
    imported so far (a kind need not list them: it honours every store section's tier). Kinds' declarations are
    checked against it; a spec takes the tiers of its own storage model (`tier_names`)."""
    found, todo = [NVME.name, MANAGED], list(StoreSettings.__subclasses__())
    while todo:
        model = todo.pop(0)
        todo += model.__subclasses__()
        tier = model.checkpoint_tier
        if model.__module__.startswith(STORES_PACKAGE) and tier is not None and tier not in found:
            found.append(tier)
    return tuple(found)


def tier_names(storage: Type[Storage]) -> Tuple[str, ...]:
    """The ``checkpoints.tier`` values of a spec whose storage model is `storage`, in the order the schema and messages
    list them: the shared file system's tier, the node-local tier staged to it, the service's, then the other store
    sections' tiers."""
    models = list(storage.section_models().values())
    offered = [m.checkpoint_tier for m in models if m.checkpoint_tier is not None]
    first = [m.checkpoint_tier for m in models if m.checkpoint_tier is not None and m.shared_file_system]
    return tuple(dict.fromkeys([*first, NVME.name, MANAGED, *offered]))


def _summaries(storage: Type[Storage]) -> str:
    """The tiers of `storage`, each with what it is: the schema's description of ``checkpoints.tier``."""
    models = storage.section_models()
    file_system = models.get(storage.file_system_key() or "")
    said = {NVME.name: f"instance-store NVMe, copied to {file_system.title if file_system else 'the shared file system'}",
            MANAGED: MANAGED_SUMMARY,
            **{m.checkpoint_tier: m.checkpoint_summary for m in models.values() if m.checkpoint_tier is not None}}
    each = [f"{t} ({said[t]})" if said.get(t) else t for t in tier_names(storage)]
    return (", ".join(each[:-1]) + " or " + each[-1] if len(each) > 1 else each[0]) + "."


class Checkpoints(SpecModel):
    """Where training jobs write checkpoints, how often, and how many complete ones the resume helper keeps."""

    # the composition root narrows it to the tiers the spec's stores offer (`checkpoints_model`)
    tier: str = Field(description="A store section's tier, nvme (instance-store NVMe, copied to the shared file "
                                  "system) or managed (HyperPod on EKS managed tiered checkpointing: CPU memory, then "
                                  "S3).")
    directory: str = Field(
        "/checkpoints",
        description="A store's tier: the directory below the store's mount point; nvme: the directory below the "
                    "shared file system's mount point (and below the instance NVMe); managed: the prefix in the "
                    "cluster's data bucket the checkpoints persist to.")
    interval_minutes: int = Field(30, ge=1, le=10080,
                                  description="Minutes of training between checkpoints (what `plan` prices).")
    keep: int = Field(3, ge=1, le=1000, description="Complete checkpoints the resume helper keeps on each tier.")
    export_to_s3: bool = Field(
        True, description="A store that is not S3 (and nvme, on the shared file system) must export directory to S3 "
                          "(e.g. a data repository association with auto_export NEW covering it), so every checkpoint "
                          "reaches S3 as well.")
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
    :param durable: the shared directory every node restores from (a store's tier, nvme), or the S3 prefix ``s3://<data
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
    if ck.tier == MANAGED:
        return CheckpointPaths(MANAGED, f"s3://<data bucket>{ck.directory}/")
    store = durable_store(spec)
    if store is None:  # the section's rules refuse such a spec before anything asks for its paths
        raise ValueError(f"checkpoints.tier {ck.tier}: the spec has no store section that keeps its checkpoints")
    durable = store[1].mount_point.rstrip("/") + ck.directory
    return CheckpointPaths(ck.tier, durable, NVME.below(ck.directory) if ck.tier == NVME.name else None)


def problems(spec: Any) -> List[Problem]:
    """What the section needs of the rest of the spec, whatever the orchestrator (field paths from the top)."""
    ck = spec.checkpoints
    if ck is None:
        return []
    found: List[Problem] = []
    if ck.tier == MANAGED:
        if ck.memory_percent is None:
            found.append(("checkpoints.memory_percent", "tier managed needs the share of each node's memory HyperPod "
                          f"sets aside for checkpoints: {MANAGED_MEMORY_PERCENT[0]}-{MANAGED_MEMORY_PERCENT[1]} "
                          f"({MANAGED_SETUP_URL})"))
        return found
    if ck.memory_percent is not None:
        found.append(("checkpoints.memory_percent", f"applies to tier managed only, not {ck.tier}; leave it out"))
    store = durable_store(spec)
    if store is None:
        return found + [("checkpoints.tier", _missing_store(spec))]
    key, section = store
    found += [(f"storage.{key}.{path}" if path else f"storage.{key}", f"checkpoints.tier {ck.tier}: {msg}")
              for path, msg in section.checkpoint_problems()]
    if ck.tier == NVME.name:
        for i, g in enumerate(spec.node_groups):
            if g.role == "gpu" and NVME.size(g.instance) is None:
                instead = section.checkpoint_tier or "a store's tier"
                found.append((f"node_groups[{i}].instance_type", f"checkpoints.tier nvme needs instance-store NVMe; "
                              f"{g.instance_type} has none (EC2 instance types reference): use tier {instead}"))
    why = section.checkpoint_export(ck.directory, f"storage.{key}") if ck.export_to_s3 else None
    if why is not None:
        found.append(("checkpoints.export_to_s3", f"{why}, or set export_to_s3: false"))
    return found


def store_offering(spec: Any, tier: str) -> Optional[Tuple[str, Any]]:
    """(key, section) of the store section the spec gives that offers checkpoint `tier`, or None."""
    return next(((k, s) for k, s in spec.storage.store_sections() if s.checkpoint_tier == tier), None)


def tier_store(spec: Any) -> Optional[Tuple[str, Any]]:
    """(key, section) of the store section that offers the spec's checkpoint tier, or None."""
    return store_offering(spec, spec.checkpoints.tier)


def durable_store(spec: Any) -> Optional[Tuple[str, Any]]:
    """(key, section) of the store section that keeps the spec's checkpoints: the one offering the tier, or for nvme
    (staged on the node) the shared file system; None for managed, or where the spec lacks the section."""
    if spec.checkpoints.tier == NVME.name:
        return cast(Optional[Tuple[str, Any]], spec.storage.file_system())
    return tier_store(spec)


def _missing_store(spec: Any) -> str:
    """What a spec whose tier stands on a store section it lacks must add."""
    tier, storage = spec.checkpoints.tier, type(spec.storage)
    models = storage.section_models()
    if tier == NVME.name:
        key = storage.file_system_key()
        title = models[key].title if key is not None else "the shared file system"
        return (f"nvme needs {f'storage.{key}' if key else 'a shared file system section'}: the instance NVMe is lost "
                f"with its node, so a replaced node restores from the copy on {title}")
    offers = [m.checkpoint_offer or f"storage.{k}" for k, m in models.items() if m.checkpoint_tier == tier]
    offered = [f"storage.{k}" for k, s in spec.storage.store_sections() if s.checkpoint_tier is not None]
    return (f"{tier} needs {' or '.join(offers) or 'a store section that offers it'}: the checkpoints live on it"
            + (f" ({', '.join(offered)} {'offers another tier' if len(offered) == 1 else 'offer other tiers'})"
               if offered else ""))


def refused(spec: Any, tiers: FrozenSet[str], note: str = "") -> List[Problem]:
    """The problem of a spec whose checkpoints ask for a tier its kind does not declare (`tiers`, besides every store
    section's), saying why (`note`, or the tier's own reason) and which tiers the kind takes."""
    ck = spec.checkpoints
    offered = {m.checkpoint_tier for m in type(spec.storage).section_models().values()}
    if ck is None or ck.tier in tiers or ck.tier in offered:
        return []
    why = note or NOT_HONOURED.get(ck.tier, f"orchestrator {spec.orchestrator.type} does not provide it")
    allowed = ", ".join(t for t in tier_names(type(spec.storage)) if t in tiers or t in offered)
    return [("checkpoints.tier", f"orchestrator {spec.orchestrator.type} cannot honour tier {ck.tier}: {why}; "
             f"use {allowed}")]


def checkpoints_model(storage: Type[Storage]) -> Type[Checkpoints]:
    """`Checkpoints` whose ``tier`` takes the tiers of `storage` (`tier_names`): the schema lists them, and a spec naming
    another is refused with the allowed values."""
    names = tier_names(storage)
    tier: Any = Literal[names]  # type: ignore[valid-type]
    model = create_model("Checkpoints", __base__=Checkpoints,
                         tier=(tier, Field(description=_summaries(storage))))
    model.__doc__ = Checkpoints.__doc__
    return model

"""The spec's ``storage.fsx`` section: FSx for Lustre in the GPU availability zone and its data repository
associations.

Joined into the spec's ``storage`` by the composition root (`Store.settings`), as Mountpoint's section is. The rules
checked here are the ones CloudFormation and cfn-lint let through and the service refuses half-way into a deploy (FSx
API reference: CreateFileSystem, CreateFileSystemLustreConfiguration, CreateFileSystemLustreMetadataConfiguration,
CreateDataRepositoryAssociation).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar, Dict, FrozenSet, List, Literal, Optional, Tuple

from pydantic import Field, field_validator, model_validator

from fmcluster.platforms.storage import PARALLELCLUSTER, CsiAddon
from fmcluster.spec.base import Problem, SpecModel, raise_problems
from fmcluster.spec.storage import MOUNT_FORMS, RESERVED_MOUNT_POINTS, BucketLink, Storage, StoreSettings, nested

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

# SSD PERSISTENT_2 and SCRATCH_2: 1200 GiB, 2400 GiB, then increments of 2400 GiB (CreateFileSystem StorageCapacity).
CAPACITY_SMALL_GIB = (1200, 2400)
CAPACITY_STEP_GIB = 2400
PERSISTENT_2_THROUGHPUT = (125, 250, 500, 1000)  # MB/s per TiB
MAX_DATA_REPOSITORY_ASSOCIATIONS = 8  # per file system (CreateDataRepositoryAssociation)
Event = Literal["NEW", "CHANGED", "DELETED"]
IMPORT_EVENTS: Tuple[Event, ...] = ("NEW", "CHANGED", "DELETED")
CLAIM = "fsx"  # the Kubernetes claim pods mount (the example jobs name it)
# What its declaration (the folder's __init__) and its mount (mount.py) both name, here so that reading a spec loads
# no mount forms: its name, its entry in HyperPod's lifecycle parameters (node/lifecycle.py reads it), its CSI add-on.
STORE = "fsx-lustre"
LIFECYCLE_KEY = "fsx"  # its entry in HyperPod's lifecycle parameters (node/lifecycle.py reads it)
CSI_ADDON = CsiAddon(
    "aws-fsx-csi-driver", service_account="fsx-csi-controller-sa", always=True,
    source="https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-create.html", node_millicores=30,
    node_source="https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/master/charts/aws-fsx-csi-driver/"
                "values.yaml (node plugin, registrar and liveness probe, 10m each)")
S3_PATH_PATTERN = r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/([^\s]*/)?$"
EVENTS_THAT_EXPORT_A_NEW_CHECKPOINT = "NEW"


def metadata_iops_allowed(iops: int) -> bool:
    """SSD file systems: 1500, 3000, 6000, 12000, then multiples of 12000 up to 192000."""
    return iops in (1500, 3000, 6000) or (iops % 12000 == 0 and 12000 <= iops <= 192000)


def _same_bucket_nested(a: DataRepositoryAssociation, b: DataRepositoryAssociation) -> bool:
    """Both link the cluster's data bucket, or both another bucket, at prefixes one inside the other."""
    if a.repository_path is None and b.repository_path is None:
        return nested(f"s3://data/{a.data_bucket_prefix}", f"s3://data/{b.data_bucket_prefix}")
    return bool(a.repository_path and b.repository_path and nested(a.repository_path, b.repository_path))


class DataRepositoryAssociation(SpecModel):
    """A file system directory linked to an S3 prefix: lazy import in, automatic export out."""

    file_system_path: str = Field(
        description="Directory from the file system's root, e.g. /datasets; nodes see it below mount_point (/fsx/datasets)."
    )
    repository_path: Optional[str] = Field(
        None, description="s3://bucket/prefix/ of a bucket you own; give this or data_bucket_prefix. Automatic import "
                          "needs it in the cluster's Region; an SSE-KMS key must let FSx's service-linked role use it "
                          "(fmcluster preflight checks; docs/preflight.md)."
    )
    data_bucket_prefix: Optional[str] = Field(
        None, description="Prefix in the cluster's data bucket, e.g. checkpoints/; give this or repository_path."
    )
    auto_import: List[Event] = Field(
        default_factory=lambda: list(IMPORT_EVENTS),
        description="S3 events imported automatically (empty: none).",
    )
    auto_export: List[Event] = Field(
        default_factory=list, description="File system events exported to S3 automatically (empty: none)."
    )
    import_metadata_on_create: bool = Field(True, description="Import the prefix's metadata when the link is made.")
    imported_file_chunk_size_mib: int = Field(1024, ge=1, le=512000, description="Stripe size of imported files.")

    @field_validator("file_system_path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/") or "//" in v or "/../" in f"{v}/" or "/./" in f"{v}/":
            raise ValueError(f"{v!r} must be an absolute, normalized directory such as /datasets")
        if len(v) > 4096:
            raise ValueError("at most 4096 characters")
        return v if v == "/" else v.rstrip("/")

    @field_validator("repository_path")
    @classmethod
    def _s3(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.match(S3_PATH_PATTERN, v):
            raise ValueError(f"{v!r} is not s3://bucket/ or s3://bucket/prefix/ (with the trailing slash)")
        return v

    @field_validator("data_bucket_prefix")
    @classmethod
    def _prefix(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (not v.endswith("/") or v.startswith("/") or "//" in v or not v.strip("/")):
            raise ValueError(f"{v!r} must be a relative prefix ending in /, e.g. checkpoints/")
        return v

    @model_validator(mode="after")
    def _one_repository(self) -> DataRepositoryAssociation:
        found = []
        if (self.repository_path is None) == (self.data_bucket_prefix is None):
            found.append(("repository_path", "give exactly one of repository_path (s3://bucket/prefix/) "
                          "or data_bucket_prefix (a prefix in the cluster's data bucket)"))
        for field in ("auto_import", "auto_export"):
            events = getattr(self, field)
            if len(set(events)) != len(events):
                found.append((field, "events must be unique"))
        raise_problems(found)
        return self


class _LeadingFields(SpecModel):
    """The keys the section lists before ``mount_point`` (a field of every store section): a base of `Fsx` placed
    after `StoreSettings`, so the keys keep the order messages have always listed them in."""

    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = Field(
        "PERSISTENT_2", description="PERSISTENT_2 (replicated, backed up); SCRATCH_2 for throwaway clusters."
    )
    storage_capacity_gib: int = Field(4800, ge=1200, description="1200, 2400, or a multiple of 2400 GiB.")
    throughput_per_tib: Optional[int] = Field(
        None, description="PERSISTENT_2 MB/s per TiB: 125, 250, 500 or 1000 (default 250); not for SCRATCH_2."
    )
    lustre_version: Literal["2.15", "2.12"] = Field("2.15", description="Lustre server version.")
    efa: bool = Field(False, description="EFA and GPUDirect Storage (PERSISTENT_2, Lustre 2.15, EFA node types).")
    metadata_iops: Optional[int] = Field(
        None, description="PERSISTENT_2 metadata IOPS (USER_PROVISIONED); absent: AUTOMATIC, scaled with capacity."
    )
    compression: Literal["LZ4", "NONE"] = Field("LZ4", description="Data compression on the file servers.")


class Fsx(StoreSettings, _LeadingFields):
    """FSx for Lustre in the GPU availability zone, linked to S3 by data repository associations."""

    # a boot line, a CSI volume, HyperPod's lifecycle entry and both services' own entries (mount.py)
    forms: ClassVar[FrozenSet[str]] = frozenset(MOUNT_FORMS)
    shared_file_system: ClassVar[bool] = True
    checkpoint_tier: ClassVar[Optional[str]] = "fsx"
    checkpoint_summary: ClassVar[str] = "shared Lustre, exported to S3"
    title: ClassVar[str] = "FSx for Lustre"
    claim: ClassVar[Optional[str]] = CLAIM

    mount_point: str = Field("/fsx", description="Where nodes mount the file system.")
    availability_zone: Optional[str] = Field(None, description="Must be the cluster's availability_zone if given.")
    weekly_maintenance_start: str = Field(
        "7:03:00", description="d:HH:MM in UTC, d = 1 (Monday) to 7 (Sunday)."
    )
    automatic_backup_retention_days: Optional[int] = Field(
        None, ge=0, le=90, description="Daily backups kept (PERSISTENT_2; default 7; 0 turns them off)."
    )
    daily_backup_start: str = Field("05:00", description="HH:MM in UTC.")
    data_repository_associations: List[DataRepositoryAssociation] = Field(default_factory=list)

    @field_validator("mount_point")
    @classmethod
    def _mount_point(cls, v: str) -> str:
        v = v.rstrip("/") or "/"
        if not re.fullmatch(r"(/[A-Za-z0-9._-]+)+", v):
            raise ValueError(f"{v!r} is not an absolute path of letters, digits, '.', '_' and '-'")
        if v in RESERVED_MOUNT_POINTS:
            raise ValueError(f"{v} would shadow a system directory; use e.g. /fsx")
        return v

    @field_validator("weekly_maintenance_start")
    @classmethod
    def _weekly(cls, v: str) -> str:
        if not re.fullmatch(r"[1-7]:([01]\d|2[0-3]):[0-5]\d", v):
            raise ValueError(f"{v!r} is not d:HH:MM (d 1-7, Monday = 1), e.g. 7:03:00")
        return v

    @field_validator("daily_backup_start")
    @classmethod
    def _daily(cls, v: str) -> str:
        if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", v):
            raise ValueError(f"{v!r} is not HH:MM, e.g. 05:00")
        return v

    @property
    def persistent(self) -> bool:
        return self.deployment_type == "PERSISTENT_2"

    def node_path(self, file_system_path: str) -> str:
        """Where nodes see a directory of the file system: below the mount point."""
        return self.mount_point if file_system_path == "/" else self.mount_point + file_system_path

    @property
    def throughput(self) -> Optional[int]:
        if not self.persistent:
            return None
        return self.throughput_per_tib if self.throughput_per_tib is not None else 250

    @property
    def backup_retention_days(self) -> int:
        if not self.persistent:
            return 0
        return 7 if self.automatic_backup_retention_days is None else self.automatic_backup_retention_days

    def spec_rules(self, spec: ClusterSpec, at: str) -> List[Problem]:
        found: List[Problem] = []
        if self.availability_zone and self.availability_zone != spec.availability_zone:
            found.append((f"{at}.availability_zone", f"{self.availability_zone} is not the GPU nodes' "
                          f"{spec.availability_zone}; cross-AZ Lustre traffic is slow and billed: leave it out"))
        if self.efa:
            # the node group holds what to change, so the path is the group's
            for i, g in enumerate(spec.node_groups):
                if g.role == "gpu" and not g.efa_enabled:
                    found.append((f"node_groups[{i}].efa", f"{at}.efa needs EFA clients; group {g.name} "
                                  f"({g.instance_type}) has none: enable EFA there or set {at}.efa: false"))
        return found

    def checkpoint_export(self, directory: str, at: str) -> Optional[str]:
        if any(exports(d, directory) for d in self.data_repository_associations):
            return None
        return (f"no data repository association exports {directory} to S3: add {at}.data_repository_associations "
                f"entry {{file_system_path: {directory}, data_bucket_prefix: checkpoints/, auto_import: [], "
                "auto_export: [NEW, CHANGED]}")

    def data_bucket_links(self) -> List[BucketLink]:
        return [BucketLink(d.file_system_path, d.data_bucket_prefix, bool(d.auto_import), bool(d.auto_export))
                for d in self.data_repository_associations if d.data_bucket_prefix is not None]

    def service_problems(self, service: str, at: str) -> List[Problem]:
        if service == PARALLELCLUSTER and self.efa:
            return [(f"{at}.efa", f"ParallelCluster mounts {self.title} itself, over TCP (its SharedStorage section "
                     f"has no EFA client setting); set {at}.efa: false")]
        return []

    def node_mounts(self, group: Any) -> List[Dict[str, Any]]:
        # over EFA where both ends have it
        return [{"path": self.mount_point, "fstype": "lustre", "required": True, "efa": self.efa and group.efa_enabled}]

    @model_validator(mode="after")
    def _fsx_rules(self) -> Fsx:
        found = []
        cap = self.storage_capacity_gib
        if cap not in CAPACITY_SMALL_GIB and cap % CAPACITY_STEP_GIB:
            lower = cap // CAPACITY_STEP_GIB * CAPACITY_STEP_GIB
            found.append(("storage_capacity_gib", f"{cap} GiB is refused by FSx: use 1200, 2400 or a multiple of 2400 "
                          f"(nearest: {max(lower, 2400)} or {lower + CAPACITY_STEP_GIB})"))
        if self.persistent:
            if self.throughput_per_tib is not None and self.throughput_per_tib not in PERSISTENT_2_THROUGHPUT:
                found.append(("throughput_per_tib", f"PERSISTENT_2 takes {', '.join(map(str, PERSISTENT_2_THROUGHPUT))} "
                              f"MB/s per TiB, not {self.throughput_per_tib}"))
            if self.metadata_iops is not None and not metadata_iops_allowed(self.metadata_iops):
                found.append(("metadata_iops", "SSD file systems take 1500, 3000, 6000, 12000 or a multiple of 12000 up "
                              "to 192000"))
            if self.metadata_iops is not None and self.lustre_version != "2.15":
                found.append(("metadata_iops", "provisioned metadata IOPS need Lustre 2.15"))
            if self.efa and self.lustre_version != "2.15":
                # EFA-enabled file systems need Lustre 2.15 servers and clients (unverified in the API reference).
                found.append(("lustre_version", "an EFA-enabled file system needs Lustre 2.15"))
        else:
            for field, value in (("throughput_per_tib", self.throughput_per_tib), ("metadata_iops", self.metadata_iops)):
                if value is not None:
                    found.append((field, f"applies to PERSISTENT_2 only; {self.deployment_type} has fixed performance"))
            if self.efa:
                found.append(("efa", "EFA needs a PERSISTENT_2 file system (with a metadata configuration); "
                              "SCRATCH_2 cannot use it"))
            if self.automatic_backup_retention_days:
                found.append(("automatic_backup_retention_days", "SCRATCH_2 file systems have no backups; use 0 or "
                              "PERSISTENT_2"))
        found += self._dra_problems()
        raise_problems(found)
        return self

    def _dra_problems(self) -> List[tuple[str, str]]:
        found = []
        dras = self.data_repository_associations
        if len(dras) > MAX_DATA_REPOSITORY_ASSOCIATIONS:
            # the paths are not compared: entries must go first, and comparing every pair is quadratic
            return [("data_repository_associations", f"{len(dras)} associations; FSx allows at most "
                     f"{MAX_DATA_REPOSITORY_ASSOCIATIONS} per file system")]
        for i, dra in enumerate(dras):
            found += self._repeats_mount_point(i, dra.file_system_path)
            earlier = dras[:i]
            j = next((j for j, other in enumerate(earlier)
                      if nested(dra.file_system_path, other.file_system_path)), None)
            if j is not None:
                other_path = dras[j].file_system_path
                found.append((f"data_repository_associations[{i}].file_system_path",
                              f"{dra.file_system_path} is already linked by entry {j}; each directory links once"
                              if other_path == dra.file_system_path else
                              f"{dra.file_system_path} and {other_path} (entry {j}) are nested; "
                              "FSx refuses overlapping association paths"))
            j = next((j for j, other in enumerate(earlier) if _same_bucket_nested(dra, other)), None)
            if j is not None:
                found.append((f"data_repository_associations[{i}]",
                              f"its S3 location overlaps entry {j}'s; each association needs its own bucket or "
                              "prefix, not nested in another's"))
        return found

    def _repeats_mount_point(self, index: int, path: str) -> List[tuple[str, str]]:
        # FileSystemPath is a path on the file system, from its root (FSx API reference: DataRepositoryAssociation),
        # and nodes mount that root at mount_point: writing the mount point again nests the data one level deeper.
        mount = self.mount_point
        if path != mount and not path.startswith(mount + "/"):
            return []
        inside = path[len(mount):] or "/"
        return [(f"data_repository_associations[{index}].file_system_path",
                 f"{path} is a path inside the file system, which nodes mount at {mount}: they would see it at "
                 f"{self.node_path(path)}; write {inside} to have it at {path}")]

    def read_bytes_per_s(self) -> Optional[float]:
        # capacity x throughput per TiB: PERSISTENT_2's (default 250), SCRATCH_2's 200 MB/s baseline (it bursts above)
        return (self.throughput or 200) * 1e6 * self.storage_capacity_gib / 1024


def exports(dra: DataRepositoryAssociation, directory: str) -> bool:
    """The association covers `directory` (it is the association's directory or below it) and exports new files."""
    root = dra.file_system_path.rstrip("/") + "/"
    return EVENTS_THAT_EXPORT_A_NEW_CHECKPOINT in dra.auto_export and (directory + "/").startswith(root)


def fsx_of(storage: Storage) -> Optional[Fsx]:
    """The spec's ``storage.fsx`` section, or None where the spec has none (or the model was built without FSx's
    section): typed for readers, since `Storage` declares no store's field."""
    section = getattr(storage, "fsx", None)
    return section if isinstance(section, Fsx) else None


def association_bucket(storage: Storage, dra: DataRepositoryAssociation) -> Optional[str]:
    """The bucket an association links: its own, the existing data bucket, or None for the one fmcluster creates."""
    if dra.repository_path:
        return dra.repository_path[len("s3://"):].split("/", 1)[0]
    return storage.data_bucket.existing_name


def association_s3_path(storage: Storage, dra: DataRepositoryAssociation, created_bucket: str = "<data bucket>") -> str:
    """s3://bucket/prefix/ the association links, naming the created bucket `created_bucket` (named at deploy)."""
    if dra.repository_path:
        return dra.repository_path
    return f"s3://{association_bucket(storage, dra) or created_bucket}/{dra.data_bucket_prefix}"

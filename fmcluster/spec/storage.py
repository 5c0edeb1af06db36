"""The spec's `storage` section: the data bucket, and the sections of the stores, which declare their own settings
(`StoreSettings`, in each store's folder) joined in by `fmcluster.spec.loading.spec_model`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, FrozenSet, Iterator, List, Optional, Tuple, Type, get_args

from pydantic import Field, field_validator, model_validator

from fmcluster.spec.base import Problem, SpecModel, raise_problems

# "A lifecycle configuration can have up to 1,000 rules" (Amazon S3 User Guide, Lifecycle configuration elements:
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-rules.html).
MAX_LIFECYCLE_RULES = 1000
BUCKET_NAME_PATTERN = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
# Mount points a store must never shadow.
RESERVED_MOUNT_POINTS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/opt", "/proc", "/root", "/run",
                         "/sbin", "/sys", "/tmp", "/usr", "/var")  # noqa: S108 - a deny list, not a temp path


def nested(a: str, b: str) -> bool:
    """True when one path is the other or lies below it (compared by whole components)."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


class LifecycleRule(SpecModel):
    """An S3 lifecycle rule on the data bucket."""

    prefix: str = Field("", description="Objects it applies to, e.g. checkpoints/ (empty: the whole bucket).")
    noncurrent_version_expiration_days: Optional[int] = Field(
        None, ge=1, description="Delete overwritten or deleted versions after N days."
    )
    expiration_days: Optional[int] = Field(None, ge=1, description="Delete current objects after N days.")
    intelligent_tiering_after_days: Optional[int] = Field(
        None, ge=0, description="Move objects to S3 Intelligent-Tiering after N days."
    )
    abort_incomplete_multipart_upload_days: Optional[int] = Field(
        7, ge=1, description="Remove parts of unfinished uploads after N days."
    )

    @model_validator(mode="after")
    def _does_something(self) -> LifecycleRule:
        if all(v is None for v in (self.noncurrent_version_expiration_days, self.expiration_days,
                                   self.intelligent_tiering_after_days, self.abort_incomplete_multipart_upload_days)):
            raise_problems([("prefix", "the rule sets no action; give an expiration, a transition or an abort")])
        return self


class DataBucket(SpecModel):
    """The durable tier: an S3 bucket fmcluster creates (SSE-KMS, versioned, logged) or one you have."""

    existing_name: Optional[str] = Field(
        None, pattern=BUCKET_NAME_PATTERN, description="use this existing bucket instead of creating one"
    )
    lifecycle_rules: List[LifecycleRule] = Field(
        default_factory=lambda: [LifecycleRule(noncurrent_version_expiration_days=30)],
        description="Lifecycle of a bucket fmcluster creates (default: noncurrent versions expire after 30 days).",
    )
    access_log_retention_days: int = Field(365, ge=1, description="Server access logs kept this long.")

    @field_validator("lifecycle_rules")
    @classmethod
    def _rules(cls, v: List[LifecycleRule]) -> List[LifecycleRule]:
        if len(v) > MAX_LIFECYCLE_RULES:
            raise ValueError(f"{len(v)} rules; S3 takes at most {MAX_LIFECYCLE_RULES:,} in a bucket's lifecycle "
                             "configuration (Amazon S3 User Guide, lifecycle configuration elements)")
        first: Dict[Tuple[Any, ...], int] = {}
        found = []
        for i, rule in enumerate(v):
            j = first.setdefault(tuple(sorted(rule.model_dump().items())), i)
            if j != i:
                found.append((f"[{i}]", f"the same rule as entry {j}; give each rule once"))
        raise_problems(found)
        return v


# The forms of the storage contract (fmcluster.platforms.storage) a store's mount may have, and a kind mounts
# through: boot lines, a Kubernetes volume, HyperPod's lifecycle entry, a service's own entry (by service).
MOUNT_FORMS = ("boot", "kubernetes", "lifecycle", "sagemaker-hyperpod", "parallelcluster")
BOOT_ONLY: Tuple[FrozenSet[str], ...] = (frozenset({"boot"}),)


@dataclass(frozen=True)
class BucketLink:
    """A directory of a store (from its root, as below its mount point) linked to a prefix of the cluster's data
    bucket (relative, ending in /): ``imports``, S3 is a source of the directory (nodes stage data through the
    bucket); ``exports``, the store writes the directory's files there itself."""

    directory: str
    prefix: str
    imports: bool
    exports: bool


class StoreSettings(SpecModel):
    """A store's section under ``storage``, declared in the store's folder (``settings.py``) and joined into the spec
    by the composition root, as kinds' settings are: the spec never names the store.

    ``mount_point`` is where nodes see the store: no two stores share or nest mount points. ``forms`` are the forms
    of the storage contract its mount has (`MOUNT_FORMS`): the spec refuses it under a kind that mounts stores through
    none of them (``OrchestratorTraits.storage.mount_forms``), rather than fail at synth."""

    forms: ClassVar[FrozenSet[str]] = frozenset()
    # the ``checkpoints.tier`` it offers (checkpoints written below its mount point), or None
    checkpoint_tier: ClassVar[Optional[str]] = None
    # what a spec adds to get that tier, said when it asks for the tier without the section ("a writable storage.x")
    checkpoint_offer: ClassVar[str] = ""
    # what the tier is, in the schema's description of ``checkpoints.tier``
    checkpoint_summary: ClassVar[str] = ""
    # The cluster's shared file system (full POSIX, read-write on every node): where jobs write, checkpoints are
    # copied, models are staged and served from. At most one store's section is (`Storage.file_system`).
    shared_file_system: ClassVar[bool] = False
    # how messages name the store (its `Store.title`)
    title: ClassVar[str] = ""
    # the Kubernetes claim (and pod volume name) its volume is mounted by, where its mount has a Kubernetes form
    claim: ClassVar[Optional[str]] = None
    mount_point: str

    def checkpoint_problems(self) -> List[Problem]:
        """Why this section cannot take the checkpoints of the tier it offers, as (path below it, message)."""
        return []

    def checkpoint_notes(self) -> List[str]:
        """What a training job must do differently to checkpoint to it (said by `plan` and the docs)."""
        return []

    def checkpoint_export(self, directory: str, at: str) -> Optional[str]:
        """Why checkpoints written to `directory` (below its mount point) would not also reach S3, saying what to add
        below `at` (``storage.<key>``); None where they do or the store is S3 itself (``checkpoints.export_to_s3``)."""
        return None

    def data_bucket_links(self) -> List[BucketLink]:
        """Its directories linked to prefixes of the cluster's data bucket: what nodes may change there
        (spec/data_access.py), and where checkpoints below a directory persist."""
        return []

    def service_problems(self, service: str, at: str) -> List[Problem]:
        """What it cannot do where `service` (`fmcluster.platforms.storage.SERVICES`) mounts it itself, as (path,
        message), paths below `at` (``storage.<key>``): asked by that service's kind."""
        return []

    def spec_rules(self, spec: Any, at: str) -> List[Problem]:
        """Rules that read the rest of the spec (a `ClusterSpec`: the cluster's Region, AZ, network, node groups),
        their paths below `at` (``storage.<key>``), or the path of what the section asks of the rest (a node group)."""
        return []

    def gateway_endpoints(self) -> List[str]:
        """The gateway VPC endpoints its nodes reach it through, by service (``s3``, ``s3express``): the network stack
        adds those it lacks to the VPC it creates, and to an existing VPC's route tables where the spec gives them."""
        return []

    def node_mounts(self, group: Any) -> List[Dict[str, Any]]:
        """What the boot validator expects mounted on a node of `group` (NodeProfile ``mounts`` entries: path,
        fstype, and what the store's checks read)."""
        return []

    def read_bytes_per_s(self) -> Optional[float]:
        """What all its clients together read per second (the planner's model load from the shared file system);
        None where the store says nothing."""
        return None


class Storage(SpecModel):
    """Shared storage: the data bucket (always), and each store's section where given."""

    data_bucket: DataBucket = Field(default_factory=DataBucket)

    @classmethod
    def section_models(cls) -> Dict[str, Type[StoreSettings]]:
        """key -> the model of every store section this storage takes, given or not."""
        found: Dict[str, Type[StoreSettings]] = {}
        for key, info in cls.model_fields.items():
            for arg in (info.annotation, *get_args(info.annotation)):
                if isinstance(arg, type) and issubclass(arg, StoreSettings):
                    found[key] = arg
        return found

    @classmethod
    def file_system_key(cls) -> Optional[str]:
        """The key of the store section that is the shared file system (`StoreSettings.shared_file_system`), given or
        not: what a spec adds to get one ("add storage.<key>")."""
        return next((k for k, m in cls.section_models().items() if m.shared_file_system), None)

    def file_system(self) -> Optional[Tuple[str, StoreSettings]]:
        """(key, section) of the shared file system the spec gives, or None."""
        return next(((k, s) for k, s in self.store_sections() if s.shared_file_system), None)

    def store_sections(self) -> Iterator[Tuple[str, StoreSettings]]:
        """(key, section) of every store section the spec gives (the stores' own settings)."""
        for key in type(self).model_fields:
            value = getattr(self, key)
            if isinstance(value, StoreSettings):
                yield key, value

    @model_validator(mode="after")
    def _distinct_mount_points(self) -> Storage:
        seen: List[Tuple[str, str]] = []
        found = []
        for key in type(self).model_fields:
            path = getattr(getattr(self, key), "mount_point", None)
            if not isinstance(path, str):
                continue
            other = next((k for k, p in seen if nested(p, path)), None)
            if other is not None:
                found.append((f"{key}.mount_point", f"{path} is or nests storage.{other}'s mount point "
                              f"{dict(seen)[other]}; give each store its own directory"))
            seen.append((key, path))
        raise_problems(found)
        return self

    @model_validator(mode="after")
    def _existing_bucket(self) -> Storage:
        if self.data_bucket.existing_name and "lifecycle_rules" in self.data_bucket.model_fields_set:
            raise_problems([("data_bucket.lifecycle_rules", "apply to a bucket fmcluster creates; manage an existing "
                        "bucket's lifecycle where it is defined")])
        return self

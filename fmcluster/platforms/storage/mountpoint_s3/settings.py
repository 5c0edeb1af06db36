"""The spec's ``storage.mountpoint_s3`` section: an S3 bucket (or an S3 Express One Zone directory bucket) mounted on
every node with Mountpoint for Amazon S3, read-only or with the writes Mountpoint supports.

Joined into the spec's ``storage`` by the composition root (`Store.settings`); the spec never names it. What
Mountpoint supports is in docs/storage.md ("Mountpoint for Amazon S3") with its sources.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar, Dict, FrozenSet, List, Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

from fmcluster.platforms.storage import CsiAddon
from fmcluster.spec.base import Problem, SpecModel, raise_problems
from fmcluster.spec.storage import BUCKET_NAME_PATTERN, RESERVED_MOUNT_POINTS, StoreSettings

CLAIM = "s3"  # the Kubernetes claim pods mount
# What its declaration (the folder's __init__) and its mount (mount.py) both name, here so that reading a spec loads
# no mount forms: its name and its CSI add-on.
STORE = "mountpoint-s3"
# The CSI driver: EKS's add-on (https://docs.aws.amazon.com/eks/latest/userguide/s3-csi.html), not pinned here: EKS
# installs its default version for the cluster's Kubernetes version (fmcluster preflight reports it).
CSI_ADDON = CsiAddon("aws-mountpoint-s3-csi-driver", service_account="s3-csi-driver-sa",
                     source="https://docs.aws.amazon.com/eks/latest/userguide/s3-csi.html",
                     node_millicores=10,
                     node_source="https://github.com/awslabs/mountpoint-s3-csi-driver/blob/main/charts/"
                                 "aws-mountpoint-s3-csi-driver/values.yaml (node.resources.requests.cpu 10m; the "
                                 "registrar and liveness probe request none; read at v2.7.0, unverified at v1.14.1)")

if TYPE_CHECKING:
    from fmcluster.spec.cluster import ClusterSpec

# AZ ids are the Region's short name, "-az" and a number: use1-az4 is an AZ of us-east-1 (EC2 User Guide, "AZ IDs").
DIRECTIONS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c", "northeast": "ne",
              "northwest": "nw", "southeast": "se", "southwest": "sw"}
ZONE_ID_PATTERN = r"^[a-z]{2,4}\d-az\d{1,2}$"
# A directory bucket's name is base--zone-id--x-s3, 3 to 63 characters (Amazon S3 User Guide, "Directory bucket
# naming rules").
DIRECTORY_BUCKET_PATTERN = r"^([a-z0-9][a-z0-9-]*[a-z0-9])--([a-z0-9-]+-az\d{1,2})--x-s3$"
KEY_ARN_PATTERN = r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}$"
# Mountpoint's fstab form and its options (doc/CONFIGURATION.md) take prefixes of these characters here.
PREFIX_PATTERN = r"^([A-Za-z0-9!_.*'()-]+/)+$"


def zone_prefix(region: str) -> str:
    """The short Region name AZ ids start with: us-east-1 -> use1."""
    area, direction, number = region.split("-", 2)
    return f"{area}{DIRECTIONS.get(direction, direction)}{number}"


class ExpressOneZone(SpecModel):
    """An S3 Express One Zone directory bucket in the GPU AZ: single-digit millisecond requests, one AZ's durability."""

    zone_id: Optional[str] = Field(
        None, description="The AZ id (e.g. use1-az4) of availability_zone in your account (aws ec2 "
                          "describe-availability-zones). A new VPC's storage subnet gives it at deploy when absent; "
                          "required with an existing VPC.")

    @field_validator("zone_id")
    @classmethod
    def _zone(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.fullmatch(ZONE_ID_PATTERN, v):
            raise ValueError(f"{v!r} is not an AZ id such as use1-az4")
        return v


class MountpointS3(StoreSettings):
    """An S3 bucket every node mounts with Mountpoint for Amazon S3 (pods through its CSI driver)."""

    # boot lines (also what HyperPod's lifecycle scripts run) and a CSI volume (mount.py); no service mounts S3
    forms: ClassVar[FrozenSet[str]] = frozenset({"boot", "kubernetes"})
    checkpoint_tier: ClassVar[Optional[str]] = "s3"
    checkpoint_offer: ClassVar[str] = "a writable storage.mountpoint_s3 (read_only: false)"
    checkpoint_summary: ClassVar[str] = "straight to the writable Mountpoint for Amazon S3 mount, storage.mountpoint_s3"
    title: ClassVar[str] = "Mountpoint for Amazon S3"
    claim: ClassVar[Optional[str]] = CLAIM

    bucket: Optional[str] = Field(
        None, description="An existing bucket's name or ARN (a directory bucket's name ends --<zone id>--x-s3); "
                          "absent: the storage stack creates one (retained, SSE-KMS, TLS only).")
    bucket_key_arn: Optional[str] = Field(
        None, description="The KMS key of an existing SSE-KMS bucket: nodes may decrypt and generate data keys with "
                          "it. A bucket the stack creates uses its own key.")
    express: Optional[ExpressOneZone] = Field(
        None, description="Use an S3 Express One Zone directory bucket in the GPU AZ (created, or the existing "
                          "`bucket`); absent: a general purpose bucket.")
    prefix: str = Field("", description="Mount only this prefix (relative, ending in /, e.g. datasets/); empty: the "
                                        "whole bucket. Nodes' permissions stop at the prefix.")
    mount_point: str = Field("/s3", description="Where nodes (and pods' claim) see it.")
    read_only: bool = Field(True, description="Mount read-only (datasets). false: new files may be written "
                                              "sequentially (checkpoints); see allow_overwrite and allow_delete.")
    allow_overwrite: bool = Field(False, description="Let a file opened with O_TRUNC replace an existing object.")
    allow_delete: bool = Field(False, description="Let rm delete objects (Mountpoint's --allow-delete).")
    uid: Optional[int] = Field(None, ge=0, le=4294967294, description="Owner of every file and directory (default: "
                                                                       "root, which mounts it at boot). Jobs that "
                                                                       "write as another user need their uid here.")
    gid: Optional[int] = Field(None, ge=0, le=4294967294, description="Group of every file and directory (default: "
                                                                       "root's).")
    cache_directory: Optional[str] = Field(
        None, description="Cache read data on local disk here, e.g. the instance store's /opt/dlami/nvme/s3-cache "
                          "(absent: no cache). Each node caches its own reads.")
    max_cache_size_mib: Optional[int] = Field(None, ge=1, description="Cap the cache (default: Mountpoint keeps 5% "
                                                                      "of the disk free).")
    metadata_ttl_seconds: Optional[int] = Field(
        None, ge=0, description="How long file and directory metadata is trusted before S3 is asked again (default: "
                                "1 s with a cache; none without). Long TTLs suit datasets that do not change.")

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        name = bucket_name(v)
        if not (re.fullmatch(BUCKET_NAME_PATTERN, name) or re.fullmatch(DIRECTORY_BUCKET_PATTERN, name)):
            raise ValueError(f"{v!r} is not a bucket name, arn:aws:s3:::<name> or a directory bucket's ARN")
        return v

    @field_validator("bucket_key_arn")
    @classmethod
    def _key(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.fullmatch(KEY_ARN_PATTERN, v):
            raise ValueError(f"{v!r} is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>); an alias "
                             "cannot be granted")
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if v and not re.fullmatch(PREFIX_PATTERN, v):
            raise ValueError(f"{v!r} must be a relative prefix ending in /, e.g. datasets/ (letters, digits and "
                             "!_.*'()- between slashes)")
        return v

    @field_validator("mount_point", "cache_directory")
    @classmethod
    def _path(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is None:
            return v
        v = v.rstrip("/") or "/"
        if not re.fullmatch(r"(/[A-Za-z0-9._-]+)+", v):
            raise ValueError(f"{v!r} is not an absolute path of letters, digits, '.', '_' and '-'")
        if v in RESERVED_MOUNT_POINTS:
            example = "/s3" if info.field_name == "mount_point" else "/opt/dlami/nvme/s3-cache"
            raise ValueError(f"{v} is a system directory; use a directory of its own, e.g. {example}")
        return v

    @model_validator(mode="after")
    def _rules(self) -> MountpointS3:
        found: List[Problem] = []
        if self.read_only:
            for option in ("allow_overwrite", "allow_delete"):
                if getattr(self, option):
                    found.append((option, "applies to a writable mount: set read_only: false"))
        if self.max_cache_size_mib is not None and self.cache_directory is None:
            found.append(("max_cache_size_mib", "caps the cache: give cache_directory too"))
        if self.cache_directory is not None and (self.cache_directory + "/").startswith(self.mount_point + "/"):
            found.append(("cache_directory", f"{self.cache_directory} is inside the mount {self.mount_point}; use a "
                          "local disk, e.g. /opt/dlami/nvme/s3-cache"))
        if self.bucket is not None:
            directory = re.fullmatch(DIRECTORY_BUCKET_PATTERN, bucket_name(self.bucket))
            if directory and self.express is None:
                found.append(("express", f"{bucket_name(self.bucket)} is a directory bucket: add express: {{}}"))
            if not directory and self.express is not None:
                found.append(("bucket", "express takes a directory bucket (base--<zone id>--x-s3); leave bucket out "
                              "to have the storage stack create one"))
            if directory and self.express is not None and self.express.zone_id not in (None, directory.group(2)):
                found.append(("express.zone_id", f"{self.express.zone_id} is not the bucket's zone "
                              f"{directory.group(2)}"))
        elif self.bucket_key_arn is not None:
            found.append(("bucket_key_arn", "applies to an existing bucket; the bucket the stack creates has its own "
                          "key"))
        raise_problems(found)
        return self

    @property
    def existing_bucket(self) -> Optional[str]:
        """The existing bucket's name (None: the storage stack creates one)."""
        return bucket_name(self.bucket) if self.bucket is not None else None

    @property
    def zone_id(self) -> Optional[str]:
        """The directory bucket's AZ id where the spec knows it (None: a general purpose bucket, or the storage
        subnet's at deploy)."""
        if self.express is None:
            return None
        if self.bucket is not None:
            found = re.fullmatch(DIRECTORY_BUCKET_PATTERN, bucket_name(self.bucket))
            return found.group(2) if found else None
        return self.express.zone_id

    def spec_rules(self, spec: ClusterSpec, at: str) -> List[Problem]:
        found: List[Problem] = []
        zone = self.zone_id
        if zone is not None and not zone.startswith(zone_prefix(spec.region) + "-"):
            where = "bucket" if self.bucket is not None else "express.zone_id"
            found.append((f"{at}.{where}", f"{zone} is not an AZ of {spec.region} (its AZ ids start "
                          f"{zone_prefix(spec.region)}-); S3 Express serves nodes in its own AZ, the GPU AZ "
                          f"{spec.availability_zone}"))
        if self.express is not None and zone is None and spec.network.existing_vpc is not None:
            found.append((f"{at}.express.zone_id", f"required with an existing VPC: the AZ id of "
                          f"{spec.availability_zone} in your account (aws ec2 describe-availability-zones "
                          f"--zone-names {spec.availability_zone})"))
        if self.bucket is not None and self.bucket.startswith("arn:"):
            partition_region = self.bucket.split(":")
            if partition_region[2] == "s3express" and partition_region[3] != spec.region:
                found.append((f"{at}.bucket", f"the directory bucket is in {partition_region[3]}, the cluster in "
                              f"{spec.region}"))
        return found

    def checkpoint_problems(self) -> List[Problem]:
        if self.read_only:
            return [("read_only", "checkpoints are written through the mount: set read_only: false (Mountpoint then "
                     "writes new files sequentially; see allow_overwrite and allow_delete for replacing and pruning)")]
        return []

    def checkpoint_notes(self) -> List[str]:
        # doc/SEMANTICS.md: new files, written sequentially from the start, one writer; no directory rename; file
        # rename only on S3 Express One Zone. PyTorch DCP's FileSystemWriter writes .metadata.tmp and renames it.
        notes = ["each rank writes its shard to a new file, sequentially, and closes it; no appends, no seeks back, "
                 "no two writers to one file (Mountpoint, doc/SEMANTICS.md)",
                 "a directory cannot be renamed: commit a checkpoint with a marker file written last, not a "
                 "directory rename"]
        if self.express is None:
            notes.append("a general purpose bucket renames no file: PyTorch DCP's FileSystemWriter (it writes "
                         ".metadata.tmp, then renames it) fails at the end of dcp.save; write shards that need no "
                         "rename (torch.save of each shard to its final name) or use an S3 Express One Zone "
                         "directory bucket, where Mountpoint renames files")
        if not self.allow_overwrite:
            notes.append("no file is replaced (allow_overwrite is off): each checkpoint goes to a new directory")
        if not self.allow_delete:
            notes.append("old checkpoints are not pruned through the mount (allow_delete is off): S3 keeps them "
                         "until a lifecycle rule or another client deletes them")
        return notes

    def gateway_endpoints(self) -> List[str]:
        # S3 Express One Zone's zonal endpoints have a gateway endpoint of their own; without it the traffic goes
        # through the NAT gateway (Amazon S3 User Guide, "Networking for S3 Express One Zone")
        return ["s3express"] if self.express is not None else []

    def node_mounts(self, group: Any) -> List[Dict[str, Any]]:
        # Mountpoint's FUSE session names itself "mountpoint-s3" with no subtype: /proc/mounts says
        # "mountpoint-s3 <path> fuse ..." (mountpoint-s3-fs/src/fuse/config.rs, FSName).
        return [{"path": self.mount_point, "fstype": "fuse", "source": "mountpoint-s3", "required": True,
                 "read_only": self.read_only}]


def bucket_name(bucket: str) -> str:
    """A bucket's name from its name or ARN (arn:aws:s3:::name, arn:aws:s3express:<region>:<account>:bucket/name)."""
    if bucket.startswith("arn:"):
        resource = bucket.split(":", 5)[-1]
        return resource.split("/", 1)[1] if resource.startswith("bucket/") else resource
    return bucket

"""Mountpoint for Amazon S3, the shared store of `storage.mountpoint_s3`: its declaration as a store (`STORE`).

Its folder holds everything that names it: the spec section (settings.py, joined into the spec by the composition
root), the bucket constructs (construct.py), what the storage stack builds (resources.py), the mount every kind
consumes (mount.py) and how `fmcluster diff` judges changes to its buckets (changes.py). Its methods import their
modules when called, so reading a spec never loads CDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List

from fmcluster.platforms.storage import ChangeRules, Store, StoreFigures
from fmcluster.platforms.storage.mountpoint_s3.settings import CSI_ADDON, MountpointS3
from fmcluster.platforms.storage.mountpoint_s3.settings import STORE as NAME

if TYPE_CHECKING:
    from fmcluster.platforms.storage.forms import BuiltStore, StorageScope
    from fmcluster.spec.cluster import ClusterSpec


@dataclass(frozen=True)
class MountpointForS3(Store):
    def build(self, scope: StorageScope) -> BuiltStore:
        from fmcluster.platforms.storage.mountpoint_s3.resources import build

        settings = self.section(scope.spec)
        if settings is None:
            raise ValueError(f"spec: storage.{self.spec_key} is not configured; nothing to build")
        return build(scope, settings)

    def preflight_checks(self, spec: ClusterSpec) -> List[Any]:
        from fmcluster.platforms.storage.mountpoint_s3.preflight import checks

        return checks(spec, self.spec_key, self.section(spec))

    def changes(self) -> ChangeRules:
        from fmcluster.platforms.storage.mountpoint_s3.changes import RULES

        return RULES

    def figures(self) -> StoreFigures:
        from fmcluster.platforms.storage.mountpoint_s3.figures import Figures

        return Figures(self.spec_key)


STORE = MountpointForS3(
    name=NAME,
    title="Mountpoint for Amazon S3",
    spec_key="mountpoint_s3",
    resources="Mountpoint for Amazon S3 bucket",
    csi_addon=CSI_ADDON,
    settings=MountpointS3,
    summary="An S3 bucket (or S3 Express One Zone directory bucket) every node mounts with Mountpoint for Amazon S3; "
            "pods through its CSI driver (docs/storage.md).",
)

"""FSx for Lustre, the shared file system of `storage.fsx`: its declaration as a store (`STORE`).

Its folder holds everything that names it on the synth side: the spec section (settings.py, joined into the spec by
the composition root), the construct (construct.py), what the storage stack builds (resources.py), the mount every
kind consumes (mount.py), how `fmcluster diff` judges changes to it (changes.py), its alert rules (rules.yaml) and
dashboard panels (dashboard.json), what `fmcluster preflight` checks (preflight.py), what `fmcluster status` says of
it (status.py) and what the CLI says of it (`fmcluster init`'s section, its links to S3, what outlives its stack).
Its methods import their modules when called, so reading a spec never loads CDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from fmcluster.platforms.storage import ChangeRules, Store, StoreFigures
from fmcluster.platforms.storage.fsx_lustre.settings import CSI_ADDON, LIFECYCLE_KEY, Fsx, association_s3_path, fsx_of
from fmcluster.platforms.storage.fsx_lustre.settings import STORE as NAME

if TYPE_CHECKING:
    from aws_cdk import Stack
    from aws_cdk import aws_iam as iam

    from fmcluster.platforms.storage.forms import BuiltStore, S3Link, StorageScope
    from fmcluster.spec.cluster import ClusterSpec

# What `fmcluster init` writes: the smallest PERSISTENT_2 file system, datasets imported from the data bucket.
INIT_SECTION = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 1200, "throughput_per_tib": 250,
                "data_repository_associations": [{"file_system_path": "/datasets", "data_bucket_prefix": "datasets/"}]}


@dataclass(frozen=True)
class FsxLustre(Store):
    def key_statements(self, stack: Stack) -> List[iam.PolicyStatement]:
        # FSx's data repository role reads and writes the data bucket, encrypted with the data key; the statement
        # has been in the key's policy since the first release, with or without a file system.
        from fmcluster.platforms.storage.fsx_lustre.resources import linked_role_statement

        return [linked_role_statement(stack)]

    def build(self, scope: StorageScope) -> BuiltStore:
        from fmcluster.platforms.storage.fsx_lustre.resources import build

        fsx = fsx_of(scope.spec.storage)
        if fsx is None:
            raise ValueError(f"spec: storage.{self.spec_key} is not configured; nothing to build")
        return build(scope, fsx)

    def changes(self) -> ChangeRules:
        from fmcluster.platforms.storage.fsx_lustre.changes import RULES

        return RULES

    def preflight_checks(self, spec: ClusterSpec) -> List[Any]:
        from fmcluster.platforms.storage.fsx_lustre.preflight import checks

        return checks(spec)

    def figures(self) -> StoreFigures:
        from fmcluster.platforms.storage.fsx_lustre.figures import Figures

        return Figures(self.spec_key)

    def status_describers(self) -> Mapping[str, Any]:
        from fmcluster.platforms.storage.fsx_lustre.status import DESCRIBERS

        return DESCRIBERS

    def s3_links(self, spec: ClusterSpec, created_bucket: str) -> List[S3Link]:
        fsx = fsx_of(spec.storage)
        if fsx is None:
            return []
        from fmcluster.platforms.storage.forms import S3Link

        return [S3Link(node_path=fsx.node_path(d.file_system_path),
                       s3=association_s3_path(spec.storage, d, created_bucket=created_bucket),
                       auto_import=tuple(d.auto_import), auto_export=tuple(d.auto_export))
                for d in fsx.data_repository_associations]

    def init_section(self) -> Optional[Dict[str, Any]]:
        import copy

        return copy.deepcopy(INIT_SECTION)


STORE = FsxLustre(
    name=NAME,
    title="FSx for Lustre",
    spec_key="fsx",
    resources="FSx for Lustre, data repository associations",
    uses_data_key=True,
    lifecycle_key=LIFECYCLE_KEY,
    csi_addon=CSI_ADDON,
    always_described=True,
    settings=Fsx,
    summary="FSx for Lustre in the GPU availability zone, linked to S3 by data repository associations.",
    rules=Path(__file__).parent / "rules.yaml",
    dashboard=Path(__file__).parent / "dashboard.json",
    short_title="FSx",
    kept_bills=(("AWS::FSx::FileSystem", "the FSx file system outlives its stack and bills until you delete it"),),
)

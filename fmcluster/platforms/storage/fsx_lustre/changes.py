"""How ``fmcluster diff`` judges changes to FSx for Lustre (docs/changes.md, "Shared storage"): a smaller file system
fails, overlapping data repository associations fail, and a storage, throughput or metadata change takes the file
system away for minutes; a replaced association leaves the old one linking its paths until deleted."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

from fmcluster.platforms.storage import ChangeRules, ResourceEdit
from fmcluster.platforms.storage.forms import Judgement
from fmcluster.spec.storage import nested

FSX_STORAGE = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-storage-capacity.html"
FSX_THROUGHPUT = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity.html"
FSX_METADATA = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-metadata-performance.html"
FSX_DRA = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/create-dra-linked-data-repo.html"
FSX_CREATE_DRA = "https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateDataRepositoryAssociation.html"
FSX_LUSTRE_CONFIGURATION = ("https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
                            "aws-properties-fsx-filesystem-lustreconfiguration.html")
FSX = "AWS::FSx::FileSystem"
DRA = "AWS::FSx::DataRepositoryAssociation"
MODIFIED, REMOVED, REPLACED = "modified", "removed", "replaced"


def _props(resource: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    return dict((resource or {}).get("Properties") or {})


def _lustre(resource: Optional[Dict[str, Any]], key: str) -> Any:
    return (_props(resource).get("LustreConfiguration") or {}).get(key)


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def file_system(c: ResourceEdit) -> List[Judgement]:
    """An FSx for Lustre file system updated in place: a shrink fails; growth and performance changes interrupt."""
    if c.type != FSX or c.action != MODIFIED:
        return []
    out: List[Judgement] = []
    old, new = _number(_props(c.old).get("StorageCapacity")), _number(_props(c.new).get("StorageCapacity"))
    if old is not None and new is not None and new < old:
        out.append(Judgement(f"storage capacity {old:g} -> {new:g} GiB: the update fails: FSx for Lustre "
                           "storage only grows, so FSx refuses the change and the stack rolls back. Way through: keep "
                           f"{old:g} GiB, or create a second file system of the size you want and copy the data to it",
                           sources=(FSX_STORAGE,), data=True, fails=True))
    elif old is not None and new is not None and new > old:
        out.append(Judgement(f"storage capacity {old:g} -> {new:g} GiB: the file system may be "
                           "unavailable for a few minutes (UPDATING; clients retry), then rebalances its data for "
                           "hours to days with reduced performance; the next increase can follow 6 hours later at the "
                           "earliest. Deploy between jobs that read or checkpoint heavily", sources=(FSX_STORAGE,)))
    throughput = (_lustre(c.old, "PerUnitStorageThroughput"), _lustre(c.new, "PerUnitStorageThroughput"))
    if throughput[0] != throughput[1]:
        out.append(Judgement(f"throughput {throughput[0]} -> {throughput[1]} MB/s/TiB: FSx "
                           "replaces the file servers and the file system is unavailable while it does (the FSx user "
                           "guide has said a few minutes and up to an hour: plan for an hour without I/O, so jobs that "
                           "read data or write checkpoints stall), then optimizes with performance between the old "
                           "and new levels; the next change can follow 6 hours later at the earliest",
                           sources=(FSX_THROUGHPUT,)))
    metadata = (_props(c.old).get("LustreConfiguration") or {}).get("MetadataConfiguration"), \
        (_props(c.new).get("LustreConfiguration") or {}).get("MetadataConfiguration")
    if metadata[0] != metadata[1]:
        out.append(Judgement(f"metadata configuration {json.dumps(metadata[0])} -> "
                           f"{json.dumps(metadata[1])}: the file system may be unavailable for a few minutes while "
                           "metadata performance scales; increases must be 6 hours apart", sources=(FSX_METADATA,)))
    return out


def _path(value: Any) -> str:
    """A path as text, references rendered as their JSON (equal references give equal text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("Ref"), str):
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and isinstance(value.get("Fn::Join"), list) and len(value["Fn::Join"]) == 2:
        sep, parts = value["Fn::Join"]
        if isinstance(sep, str) and isinstance(parts, list):
            return sep.join(_path(p) for p in parts)
    return json.dumps(value, sort_keys=True)


def _association(resource: Optional[Dict[str, Any]]) -> Dict[str, str]:
    p = _props(resource)
    return {"fs": _path(p.get("FileSystemId")), "path": _path(p.get("FileSystemPath", "")),
            "s3": _path(p.get("DataRepositoryPath", ""))}


def describe(resource: Optional[Dict[str, Any]]) -> str:
    a = _association(resource)
    return f"{a['path']} to {a['s3']}"


def associations(changes: Sequence[ResourceEdit]) -> Dict[str, Judgement]:
    """Per replaced association (by its place), the finding that says why its replacement fails, when it does: the new
    association is created while the old one (retained or not yet deleted) still holds an overlapping file system
    path or S3 prefix on the same file system, which FSx refuses."""
    leaving = [c for c in changes if c.type == DRA and c.action in (REMOVED, REPLACED)]
    out: Dict[str, Judgement] = {}
    for c in changes:
        if c.type != DRA or c.action != REPLACED:
            continue
        if ("FileSystemId",) in c.paths:
            continue  # a new file system: the new association is on it, beside nothing
        new = _association(c.new)
        clashes = []
        for old_c in leaving:
            old = _association(old_c.old)
            if old["fs"] != new["fs"]:
                continue  # another file system
            what = [w for w, key in (("file system path", "path"), ("S3 path", "s3")) if nested(old[key], new[key])]
            if what:
                clashes.append(f"{old_c.logical_id} ({' and '.join(what)} {old['path']} <- {old['s3']})")
        if clashes:
            retained = c.policy("UpdateReplacePolicy").startswith("Retain") or c.policy("DeletionPolicy").startswith(
                "Retain")
            keep = ("the old association is retained on the file system (Retain), so after deploying the removal "
                    "delete it: `aws fsx delete-data-repository-association --association-id <its id> "
                    "--no-delete-data-in-file-system` (the files and the S3 objects stay); " if retained else "")
            out[c.where] = Judgement(
                f"data repository association {new['path']} <- {new['s3']}: the update fails: "
                f"CloudFormation creates the new association while {', '.join(clashes)} still holds the file system, "
                "and FSx refuses overlapping paths or prefixes (each association needs its own directory and its own "
                "S3 prefix); the stack rolls back. Way through: remove the association from the spec and deploy; "
                f"{keep}then add it back with the new path or prefix and deploy",
                sources=(FSX_CREATE_DRA, FSX_DRA), data=True, fails=True)
    return out


def replaced_association(c: ResourceEdit) -> Optional[Judgement]:
    """A replaced association links the new paths; the files stay, and a retained old one keeps linking its own."""
    if c.type != DRA:
        return None
    kept = ("the old association stays on the file system, detached from the stack (UpdateReplacePolicy Retain), "
            "and keeps linking its directory and prefix until you delete it"
            if c.policy("UpdateReplacePolicy").startswith("Retain") else "the old association is deleted")
    return Judgement(f"{c.type} replaced ({'; '.join(c.because)}): a new association links {describe(c.new)}; the files "
                     f"already in the file system stay; {kept}", data=True)


class FsxChanges(ChangeRules):
    stateful = (FSX, DRA)
    # Update requires: Replacement on the CloudFormation reference, create-only in no provider schema
    create_only = {(FSX, ("LustreConfiguration", key)): FSX_LUSTRE_CONFIGURATION
                   for key in ("DeploymentType", "DriveCacheType", "ImportPath", "ExportPath", "ImportedFileChunkSize")}

    def modified(self, edit: ResourceEdit) -> List[Judgement]:
        return file_system(edit)

    def replaced(self, edit: ResourceEdit) -> Optional[Judgement]:
        return replaced_association(edit)

    def refused(self, edits: Sequence[ResourceEdit]) -> Dict[str, Judgement]:
        return associations(edits)


RULES = FsxChanges()

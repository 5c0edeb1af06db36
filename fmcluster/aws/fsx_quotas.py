"""FSx for Lustre quotas (service code ``fsx``), picked by the spec's deployment type.

FSx keeps separate storage-capacity and file-system-count quotas per deployment type, plus quotas that measure
something else (Intelligent-Tiering throughput in MBps, read caches, HDD capacity per file system). Only the two
that bound the file system the spec asks for are compared with it, and only the file systems of the same
deployment type count as usage. Names and codes: docs/preflight.md (FSx for Lustre user guide, "Quotas").
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from fmcluster.aws.context import Context, paginate
from fmcluster.aws.ownership import is_ours
from fmcluster.aws.quotas import judge, quota_value
from fmcluster.aws.results import FAIL, PASS, SKIP, WARN, Outcome

SERVICE = "fsx"

# deployment type -> the quota family it draws on (SCRATCH_1 and SCRATCH_2 share the Scratch quotas)
QUOTA_FAMILY = {"PERSISTENT_2": "Persistent_2", "PERSISTENT_1": "Persistent_1",
                "SCRATCH_1": "Scratch", "SCRATCH_2": "Scratch"}

# quota family -> ((storage capacity code, name), (file systems code, name))
LUSTRE_QUOTAS: Dict[str, Tuple[Tuple[str, str], Tuple[str, str]]] = {
    "Persistent_2": (("L-8F1B9C74", "Lustre Persistent_2 storage capacity"),
                     ("L-FD6F2F22", "Lustre Persistent_2 file systems")),
    "Persistent_1": (("L-C8640C82", "Lustre Persistent_1 storage capacity"),
                     ("L-9AFA1F09", "Lustre Persistent_1 file systems")),
    "Scratch": (("L-AD2FC696", "Lustre Scratch storage capacity"),
                ("L-C48231E5", "Lustre Scratch file systems")),
}

_ORDER = {PASS: 0, SKIP: 0, WARN: 1, FAIL: 2}


def fsx_storage_gib(spec: Any) -> Optional[int]:
    """The Lustre capacity the spec asks for (storage.fsx.storage_capacity_gib), if it has a file system."""
    fsx = spec.storage.fsx
    return None if fsx is None else int(fsx.storage_capacity_gib)


def _deployment_type(fs: Dict[str, Any]) -> str:
    return str((fs.get("LustreConfiguration") or {}).get("DeploymentType", ""))


def _same_family(ctx: Context, family: str) -> Tuple[List[Dict[str, Any]], bool]:
    """Other Lustre file systems drawing on `family`'s quotas, and whether ours (storage stack) exists."""
    others, ours = [], False
    for fs in paginate(ctx.client("fsx"), "describe_file_systems", "FileSystems"):
        if fs.get("FileSystemType") != "LUSTRE" or QUOTA_FAMILY.get(_deployment_type(fs)) != family:
            continue
        if is_ours(fs.get("Tags") or [], ctx.spec, "storage"):
            ours = True  # an update keeps (or resizes) it: its capacity is the spec's, not extra usage
            continue
        others.append(fs)
    return others, ours


def check_fsx_quota(ctx: Context) -> Outcome:
    fsx = ctx.spec.storage.fsx
    if fsx is None:
        return Outcome(SKIP, "the spec has no FSx for Lustre file system", "")
    need, deployment = int(fsx.storage_capacity_gib), str(fsx.deployment_type)
    family = QUOTA_FAMILY[deployment]
    (cap_code, cap_name), (count_code, count_name) = LUSTRE_QUOTAS[family]
    others, ours = _same_family(ctx, family)
    used_gib = sum(int(fs.get("StorageCapacity", 0)) for fs in others)
    verdicts: List[Outcome] = []
    for code, name, want, have, unit in ((cap_code, cap_name, need, used_gib, "GiB"),
                                         (count_code, count_name, 0 if ours else 1, len(others), "file systems")):
        limit = quota_value(ctx, SERVICE, code)
        if limit is None:
            verdicts.append(Outcome(WARN, f"'{name}' ({code}) not found in {ctx.region}", f"{want} {unit} fit",
                                    f"check '{name}' in the Service Quotas console"))
            continue
        out = judge(want, have, limit, "", unit, name)
        verdicts.append(Outcome(out.status, f"'{name}' ({code}): {out.observed}", out.expected, out.remedy))
    worst = max(verdicts, key=lambda o: _ORDER[o.status]).status
    scope = f"{deployment}: {len(others)} other {family} Lustre file system(s)" + (", ours exists" if ours else "")
    return Outcome(worst, f"{scope}; " + "; ".join(o.observed for o in verdicts),
                   f"{need} GiB and {'no new' if ours else 'one more'} {deployment} file system within its quotas",
                   "; ".join(o.remedy for o in verdicts if o.remedy))

"""`fmcluster preflight` for FSx for Lustre (`STORE.preflight_checks`, run where the spec has ``storage.fsx``):

- its quotas (service code ``fsx``), picked by the spec's deployment type. FSx keeps separate storage-capacity and
  file-system-count quotas per deployment type, plus quotas that measure something else (Intelligent-Tiering
  throughput in MBps, read caches, HDD capacity per file system). Only the two that bound the file system the spec
  asks for are compared with it, and only the file systems of the same deployment type count as usage. Names and
  codes: docs/preflight.md (FSx for Lustre user guide, "Quotas").
- the buckets its data repository associations link besides the cluster's own (`repository_path`): FSx imports
  automatically only from a bucket in the file system's Region, does so through S3 event notifications it adds to
  the bucket, and reads and writes an SSE-KMS bucket only when the key lets its service-linked role use it
  (docs/preflight.md, "Data repository buckets", with the sources).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, Dict, List, Sequence, Tuple

from botocore.exceptions import ClientError

from fmcluster.aws.context import Context, PreflightCheck, has_code, paginate
from fmcluster.aws.network import bucket_region
from fmcluster.aws.ownership import is_ours
from fmcluster.aws.quotas import judge, quota_value
from fmcluster.aws.results import FAIL, PASS, SKIP, WARN, Outcome
from fmcluster.platforms.storage.fsx_lustre.settings import fsx_of


def checks(spec: Any) -> List[PreflightCheck]:
    """The file system's quota, then each linked bucket."""
    if fsx_of(spec.storage) is None:
        return []
    found = [PreflightCheck("quota:fsx", "FSx for Lustre quotas", "service-quotas", check_fsx_quota)]
    for linked in linked_buckets(spec):
        found.append(PreflightCheck(f"repository:{linked}", f"data repository bucket {linked}", "s3",
                                    partial(check_repository_bucket, bucket=linked)))
    return found


# --- quotas ---------------------------------------------------------------------------------------------------------

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
    fsx = fsx_of(ctx.spec.storage)
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


# --- data repository buckets ----------------------------------------------------------------------------------------

# FSx's data-repository role: AWSServiceRoleForFSxS3Access_<fs-id>, under this service principal's path
FSX_S3_ROLE = "AWSServiceRoleForFSxS3Access"
FSX_S3_SERVICE = "s3.data-source.lustre.fsx.amazonaws.com"
AWS_MANAGED_S3_KEY = "alias/aws/s3"
# the S3 events automatic import follows (NEW: created, CHANGED: created again, DELETED: removed)
IMPORT_EVENTS = ("s3:ObjectCreated:", "s3:ObjectRemoved:")


def linked_buckets(spec: Any) -> Dict[str, List[Any]]:
    """bucket -> the associations naming it by repository_path."""
    fsx = fsx_of(spec.storage)
    found: Dict[str, List[Any]] = {}
    for dra in fsx.data_repository_associations if fsx is not None else []:
        if dra.repository_path:
            found.setdefault(dra.repository_path[len("s3://"):].split("/", 1)[0], []).append(dra)
    return found


def _prefix(dra: Any) -> str:
    return str(dra.repository_path[len("s3://"):].partition("/")[2])


def _notification_overlaps(s3: Any, bucket: str, importing: Sequence[Any]) -> List[str]:
    """Existing notifications on the bucket whose events and prefix overlap an importing association's: S3 refuses a
    configuration that sends the same event for overlapping prefixes to two destinations."""
    config = s3.get_bucket_notification_configuration(Bucket=bucket)
    found: List[str] = []
    for key in ("QueueConfigurations", "TopicConfigurations", "LambdaFunctionConfigurations"):
        for entry in config.get(key) or []:
            events = entry.get("Events") or []
            rules = ((entry.get("Filter") or {}).get("Key") or {}).get("FilterRules") or []
            prefix = next((r["Value"] for r in rules if r.get("Name", "").lower() == "prefix"), "")
            for dra in importing:
                ours = _prefix(dra)
                if any(e.startswith(IMPORT_EVENTS) or e == "s3:*" for e in events) and (
                        ours.startswith(prefix) or prefix.startswith(ours)):
                    found.append(f"{entry.get('Id') or key} ({', '.join(events)} on '{prefix}')")
    return found


def _kms_key(s3: Any, bucket: str) -> str:
    """The bucket's default SSE-KMS key id or ARN, '' when it has none (SSE-S3, or no default encryption)."""
    try:
        rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    except ClientError as e:
        if has_code(e, "ServerSideEncryptionConfigurationNotFoundError"):
            return ""
        raise
    for rule in rules:
        default = rule.get("ApplyServerSideEncryptionByDefault") or {}
        if default.get("SSEAlgorithm", "").startswith("aws:kms"):
            return str(default.get("KMSMasterKeyID") or AWS_MANAGED_S3_KEY)
    return ""


def _key_lets_fsx_in(kms: Any, key: str) -> bool:
    """The key policy names FSx's data-repository role (by name or its service path), as fmcluster's own key does."""
    policy = kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"]
    text = json.dumps(json.loads(policy))
    return FSX_S3_ROLE in text or FSX_S3_SERVICE in text


def check_repository_bucket(ctx: Context, bucket: str) -> Outcome:
    associations = linked_buckets(ctx.spec)[bucket]
    importing = [d for d in associations if d.auto_import]
    s3 = ctx.client("s3")
    expected = (f"s3://{bucket} exists{f', in {ctx.region} (automatic import)' if importing else ''}; no event "
                "notification overlapping an importing prefix; an SSE-KMS key whose policy lets FSx's "
                f"{FSX_S3_ROLE}_<fs-id> role use it")
    region = bucket_region(s3, bucket)
    if region is None:
        return Outcome(FAIL, f"s3://{bucket} does not exist", expected,
                       "create the bucket or fix storage.fsx.data_repository_associations[].repository_path")
    if importing and region != ctx.region:
        return Outcome(FAIL, f"s3://{bucket} is in {region}", expected,
                       f"FSx imports automatically only from a bucket in the file system's Region ({ctx.region}): "
                       "use a bucket there, or set auto_import: [] on its associations")
    problems: List[str] = []
    fixes: List[str] = []
    overlaps = _notification_overlaps(s3, bucket, importing) if importing else []
    if overlaps:
        problems.append(f"event notifications overlapping an importing prefix: {'; '.join(overlaps)}")
        fixes.append("narrow or remove those notifications (S3 refuses overlapping ones, so FSx's import cannot add "
                     "its own), or link a prefix they do not cover")
    key = _kms_key(s3, bucket)
    # the AWS managed aws/s3 key lets every principal of the account use it through S3, FSx's role included
    if key and key != AWS_MANAGED_S3_KEY and not _key_lets_fsx_in(ctx.client("kms"), key):
        problems.append(f"SSE-KMS key {key} whose policy does not name {FSX_S3_ROLE}")
        fixes.append(f"allow kms:Decrypt, kms:GenerateDataKey and kms:DescribeKey to "
                     f"arn:aws:iam::<account>:role/aws-service-role/{FSX_S3_SERVICE}/{FSX_S3_ROLE}_* in the key policy")
    observed = f"s3://{bucket} in {region}" + (f", SSE-KMS key {key}" if key else "")
    if problems:
        return Outcome(WARN, f"{observed}: {'; '.join(problems)}", expected, "; ".join(fixes))
    return Outcome(PASS, observed, expected)

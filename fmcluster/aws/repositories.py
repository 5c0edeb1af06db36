"""The buckets a spec's data repository associations link besides the cluster's own (`repository_path`): FSx for
Lustre imports automatically only from a bucket in the file system's Region, does so through S3 event notifications
it adds to the bucket, and reads and writes an SSE-KMS bucket only when the key lets its service-linked role use it
(docs/preflight.md, "Data repository buckets", with the sources)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Sequence

from botocore.exceptions import ClientError

from fmcluster.aws.context import Context, has_code
from fmcluster.aws.results import FAIL, PASS, WARN, Outcome

# FSx's data-repository role: AWSServiceRoleForFSxS3Access_<fs-id>, under this service principal's path
FSX_S3_ROLE = "AWSServiceRoleForFSxS3Access"
FSX_S3_SERVICE = "s3.data-source.lustre.fsx.amazonaws.com"
AWS_MANAGED_S3_KEY = "alias/aws/s3"
# the S3 events automatic import follows (NEW: created, CHANGED: created again, DELETED: removed)
IMPORT_EVENTS = ("s3:ObjectCreated:", "s3:ObjectRemoved:")


def linked_buckets(spec: Any) -> Dict[str, List[Any]]:
    """bucket -> the associations naming it by repository_path."""
    fsx = spec.storage.fsx
    found: Dict[str, List[Any]] = {}
    for dra in fsx.data_repository_associations if fsx is not None else []:
        if dra.repository_path:
            found.setdefault(dra.repository_path[len("s3://"):].split("/", 1)[0], []).append(dra)
    return found


def _prefix(dra: Any) -> str:
    return str(dra.repository_path[len("s3://"):].partition("/")[2])


def _region(s3: Any, bucket: str) -> str:
    loc = s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") or "us-east-1"
    return "eu-west-1" if loc == "EU" else str(loc)


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
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as e:
        if has_code(e, "404", "NoSuchBucket", "NotFound"):
            return Outcome(FAIL, f"s3://{bucket} does not exist", expected,
                           "create the bucket or fix storage.fsx.data_repository_associations[].repository_path")
        raise
    region = _region(s3, bucket)
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

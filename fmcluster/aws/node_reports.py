"""`fmcluster status`: which runtime each node runs and its boot verdict, from the node reports nodes put in their
cluster's bucket after validating (runtime/node_report.py). A node keeps the runtime it booted with; one launched
later (scale-up, auto-repair, HyperPod node recovery, a replacement) reads the pointer of that moment, so a cluster
that lives for months runs several at once (docs/changes.md, "Which runtime each node runs")."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from fmcluster.aws.context import Context
from fmcluster.aws.status_items import OK, WARN, Item

PREFIXES = ("node-reports/", "fmcluster/node-reports/")  # EC2 kinds and HyperPod; ParallelCluster's assets bucket
SCHEMA = "fmcluster.node-report/1"  # the runtime's node_report.SCHEMA (a test holds the two equal)
MAX_REPORTS = 500  # per prefix: a status run stays bounded on the largest clusters
MAX_BYTES = 65536  # a report is a few hundred bytes
SHOWN = 64  # node lines printed; the rest are counted
EC2_FILTER_BATCH = 200


def _read_json(s3: Any, bucket: str, key: str) -> Optional[Dict[str, Any]]:
    body = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{MAX_BYTES - 1}")["Body"].read(MAX_BYTES)
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _pointer_runtime(doc: Optional[Dict[str, Any]]) -> str:
    for holder in ((doc or {}), (doc or {}).get("settings") or {}):
        digest = (holder.get("runtime") or {}).get("sha256") if isinstance(holder, dict) else None
        if isinstance(digest, str):
            return digest
    return ""


def _running(ctx: Context, ids: List[str]) -> set:
    """The EC2 instances among `ids` that are pending or running (a filter, so ids EC2 no longer knows are no error)."""
    ec2 = ctx.client("ec2")
    found = set()
    for i in range(0, len(ids), EC2_FILTER_BATCH):
        pages = ec2.get_paginator("describe_instances").paginate(Filters=[
            {"Name": "instance-id", "Values": ids[i:i + EC2_FILTER_BATCH]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        for page in pages:
            found |= {inst["InstanceId"] for r in page.get("Reservations", []) for inst in r.get("Instances", [])}
    return found


def describe(ctx: Context, bucket: str) -> Optional[Item]:
    """The bucket's node reports, or None for a bucket that holds none (data, logs, artifacts)."""
    s3 = ctx.client("s3")
    keys: List[str] = []
    truncated = False
    for prefix in PREFIXES:
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=MAX_REPORTS)
        keys += [o["Key"] for o in listed.get("Contents", []) if str(o.get("Key", "")).endswith(".json")]
        truncated = truncated or bool(listed.get("IsTruncated"))
    if not keys:
        return None
    reports = [r for r in (_read_json(s3, bucket, k) for k in keys) if r and r.get("schema") == SCHEMA]
    current = {p: _pointer_runtime(_read_json(s3, bucket, p)) for p in {str(r.get("pointer", "")) for r in reports} if p}
    ec2_ids = sorted({str(r.get("instance_id")) for r in reports if r.get("platform", "ec2") == "ec2"})
    alive = _running(ctx, ec2_ids) if ec2_ids else set()
    live = [r for r in reports if r.get("platform", "ec2") != "ec2" or r.get("instance_id") in alive]
    gone = len(reports) - len(live)
    children: List[Item] = []
    older = failed = 0
    for r in sorted(live, key=lambda r: (str(r.get("group")), str(r.get("instance_id")))):
        runtime, now = str(r.get("runtime", "")), current.get(str(r.get("pointer", "")), "")
        which = "current" if runtime and runtime == now else "older" if runtime and now else "not known"
        older += which == "older"
        verdict = str(r.get("verdict", "unknown"))
        failed += verdict != "pass"
        failing = ", ".join(map(str, r.get("failing") or []))
        detail = f"since {r.get('time', '?')}" + (f"; failing: {failing}" if failing else "")
        children.append(Item("node", str(r.get("instance_id")), f"{r.get('group')}: runtime {runtime[:12] or '?'} "
                             f"({which}), validation {verdict}", OK if verdict == "pass" else WARN, detail))
    detail = (f"{len(live) - older} on the runtime their group's pointer names now, {older} on an older one (they "
              f"booted before it changed), {failed} not passing validation")
    if gone:
        detail += f"; {gone} report(s) of instances no longer running left out"
    if truncated:
        detail += f"; more than {MAX_REPORTS} reports under a prefix: the first {MAX_REPORTS} read"
    shown, hidden = children[:SHOWN], len(children) - SHOWN
    if hidden > 0:
        shown.append(Item("node", f"{hidden} more", "not listed", OK))
    state = f"{len(live)} node(s) reported"
    return Item("node runtimes", bucket, state, WARN if failed else OK, detail,
                children=shown)

"""What a node tells `fmcluster status` after its boot validation: which instance it is, its group, the runtime it runs
(the sha256 its pointer named) and its verdict, as one small JSON object it puts in its cluster's bucket under
``node-reports/<group>/<instance id>.json`` (docs/changes.md, "Which runtime each node runs").

A node keeps the runtime it booted with, and a node launched later (a scale-up, auto-repair, HyperPod's node
recovery, a replacement) reads the pointer of that moment, so a long-lived cluster runs several runtimes at once;
these reports make that visible.

    python3 -m fmcluster.runtime.node_report --pointer FILE --validation FILE --out FILE [--root DIR]

prints ``S3_URL REGION`` (where the caller uploads ``--out``) and exits 0; exits 3 when there is nothing to report
(a pointer that names no report location, no instance id), 2 on bad arguments. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

SCHEMA = "fmcluster.node-report/1"
NOTHING = 3
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
URL = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/([A-Za-z0-9._-]+/)+$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
# The instance id on a Nitro instance, without asking the instance metadata service.
ASSET_TAG = "/sys/devices/virtual/dmi/id/board_asset_tag"
MAX_FAILING = 20


def instance_id(root: str = "") -> str:
    try:
        with open(root + ASSET_TAG) as fh:
            found = fh.read(64).strip()
    except OSError:
        return ""
    return found if INSTANCE_ID.match(found) else ""


def _runtime(pointer: Dict[str, Any]) -> str:
    """The runtime digest the node's pointer named (a ParallelCluster group object carries it in its settings)."""
    for holder in (pointer, pointer.get("settings") or {}):
        digest = ((holder.get("runtime") or {}) if isinstance(holder, dict) else {}).get("sha256")
        if isinstance(digest, str) and re.fullmatch("[0-9a-f]{64}", digest):
            return digest
    return ""


def destination(pointer: Dict[str, Any], instance: str) -> Optional[Tuple[str, str]]:
    """(object URL, region) the pointer's ``reports`` names for this instance, or None."""
    reports = pointer.get("reports")
    if not isinstance(reports, dict) or not instance:
        return None
    url, region = reports.get("url"), reports.get("region")
    if not (isinstance(url, str) and URL.match(url) and isinstance(region, str) and REGION.match(region)):
        return None
    return f"{url}{instance}.json", region


def build(pointer: Dict[str, Any], validation: Dict[str, Any], instance: str, now: float) -> Dict[str, Any]:
    given = pointer.get("reports")
    reports: Dict[str, Any] = given if isinstance(given, dict) else {}
    failing: List[str] = [str(f)[:100] for f in (validation.get("failing") or [])][:MAX_FAILING]
    return {
        "schema": SCHEMA,
        "instance_id": instance,
        "group": str(pointer.get("group", ""))[:100],
        "runtime": _runtime(pointer),
        "pointer": str(reports.get("pointer", ""))[:300],
        "platform": str(reports.get("platform", "ec2"))[:20],
        "verdict": str(validation.get("verdict", "unknown"))[:20],
        "failing": failing,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
    }


def _load(path: str) -> Dict[str, Any]:
    try:
        with open(path) as fh:
            doc = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m fmcluster.runtime.node_report", description=__doc__.splitlines()[0])
    ap.add_argument("--pointer", required=True, help="the pointer (or group object) this node booted from")
    ap.add_argument("--validation", required=True, help="the published verdict (validation.json)")
    ap.add_argument("--out", required=True, help="where to write the report")
    ap.add_argument("--root", default="", help="prefix of /sys (tests)")
    args = ap.parse_args(argv)
    pointer = _load(args.pointer)
    instance = instance_id(args.root)
    where = destination(pointer, instance)
    if where is None:
        print(f"fmcluster: no node report: {'no instance id' if not instance else 'the pointer names no location'}",
              file=sys.stderr)
        return NOTHING
    report = build(pointer, _load(args.validation) or {"verdict": "unknown"}, instance, time.time())
    try:
        with open(args.out, "w") as fh:
            json.dump(report, fh)
    except OSError as e:
        print(f"fmcluster: no node report: {e}", file=sys.stderr)
        return NOTHING
    print(*where)
    return 0


if __name__ == "__main__":
    sys.exit(main())

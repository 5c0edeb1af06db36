"""The boot pointer: what a node runs, read at boot from a stable key instead of being written into its launch template.

One small JSON document per node group, ``boot/groups/<group>.json`` in the node runtime bucket (the login node's:
``boot/login.json``)::

    {"schema": 1, "group": "p5", "level": "standard", "policy": "drain",
     "runtime": {"key": "runtime/<sha256>.zip", "sha256": "<sha256>"},
     "profile": {...the group's NodeProfile...}}

User data names only the bucket, the region and the pointer's key, none of which change with an fmcluster release,
the validation level, policy or thresholds, the collectors, alert rules or dashboards. Such a change rewrites the
pointer (and adds a runtime object); the launch template, and so every EKS node group, PCS compute node group and
instance launched from it, stays byte-identical. A node launched later reads the new pointer; a running node keeps
what it unpacked at its own boot until it is replaced on purpose.

`read_pointer_shell` is the reader user data runs. It is part of the launch template, so it changes only when this
module does: the document's ``schema`` lets a later reader refuse a format it does not know (a failed boot, said so)
rather than misread it. Every fetch is bounded in time and attempts; a pointer that cannot be read, does not parse,
names another group, or a runtime whose sha256 differs from the pointer's, fails the boot: the verdict is published
where the validator's goes (``/var/lib/fmcluster/validation.json``, read by the EKS node gate), logged to the journal
and to ``/var/log/fmcluster/user-data.log``, and user data exits 1.
"""

from __future__ import annotations

import json
from shlex import quote
from typing import Any, Dict, Optional

from fmcluster.constructs.runtime_archive import object_key

SCHEMA = 1
PREFIX = "boot/"
GROUPS_PREFIX = f"{PREFIX}groups/"
# Where nodes put their node reports (runtime/node_report.py), per group: read by `fmcluster status`.
REPORTS_PREFIX = "node-reports/"
LOGIN_KEY = f"{PREFIX}login.json"
LEVELS = ("fast", "standard", "deep")
POLICIES = ("fail", "drain", "taint", "report")
# Where the reader leaves what it read (the runtime's node_bootstrap.sh reads FMCLUSTER_LEVEL and FMCLUSTER_POLICY).
BOOT_ENV = "/etc/fmcluster/boot.env"


def group_key(group: str) -> str:
    """The stable key of a node group's pointer."""
    if not group or "/" in group:
        raise ValueError(f"group: {group!r} is not a node group name")
    return f"{GROUPS_PREFIX}{group}.json"


def pointer_document(*, group: str, runtime_key: str, sha256: str, level: str, policy: str,
                     profile_json: Optional[str], reports: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The pointer of one group (`profile_json` None: a node without boot validation, the login node). `reports`:
    where the group's nodes put their node reports (runtime/node_report.py: url, region, pointer, platform); the
    reader in user data ignores it, the runtime's bootstrap reads it."""
    if level not in LEVELS:
        raise ValueError(f"level: {level!r} is not one of {', '.join(LEVELS)}")
    if policy not in POLICIES:
        raise ValueError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}")
    if runtime_key != object_key(sha256):
        raise ValueError(f"runtime_key: {runtime_key!r} must be {object_key('<sha256>')}")
    document = {"schema": SCHEMA, "group": group, "level": level, "policy": policy,
                "runtime": {"key": runtime_key, "sha256": sha256},
                "profile": json.loads(profile_json) if profile_json is not None else None}
    if reports is not None:
        document["reports"] = dict(reports)
    return document


# Runs under python3 (3.9+, standard library) on the node: checks the pointer and writes the profile and BOOT_ENV.
# Arguments: the pointer file, the directory to write into, the group this node belongs to.
_READER = """import json, re, shlex, sys
path, etc, group = sys.argv[1:4]
try:
    doc = json.load(open(path))
    if not isinstance(doc, dict) or doc.get("schema") != @SCHEMA@:
        raise ValueError(f"schema {doc.get('schema') if isinstance(doc, dict) else None!r}; this node reads @SCHEMA@")
    if doc.get("group") != group:
        raise ValueError(f"it names group {doc.get('group')!r}, this node is in {group!r}")
    digest, key = doc["runtime"]["sha256"], doc["runtime"]["key"]
    if not (isinstance(digest, str) and re.fullmatch("[0-9a-f]{64}", digest) and key == f"runtime/{digest}.zip"):
        raise ValueError("runtime is not a runtime/<sha256>.zip key with its sha256")
    if doc.get("level") not in @LEVELS@ or doc.get("policy") not in @POLICIES@:
        raise ValueError(f"level {doc.get('level')!r} or policy {doc.get('policy')!r} unknown")
    profile = doc.get("profile")
    if profile is not None and not isinstance(profile, dict):
        raise ValueError("profile is not an object")
except (OSError, ValueError, KeyError, TypeError) as error:
    print(f"fmcluster: boot pointer {path}: {error}")
    sys.exit(1)
if profile is not None:
    with open(f"{etc}/profile.json", "w") as out:
        json.dump(profile, out)
values = {"FMCLUSTER_RUNTIME_KEY": key, "FMCLUSTER_RUNTIME_SHA256": digest,
          "FMCLUSTER_LEVEL": doc["level"], "FMCLUSTER_POLICY": doc["policy"]}
with open(f"{etc}/boot.env", "w") as out:
    out.writelines(f"{name}={shlex.quote(value)}\\n" for name, value in values.items())
""".replace("@SCHEMA@", str(SCHEMA)).replace("@LEVELS@", repr(LEVELS)).replace("@POLICIES@", repr(POLICIES))


def fetch_function_shell(name: str) -> str:
    """A bash function NAME KEY DEST copying one object of s3://$fm_bucket (in $fm_region) to DEST: six attempts
    with a growing pause, each under a timeout, so a slow or throttled S3 neither hangs a boot nor fails it at once."""
    return f"""# {name} KEY DEST: one object of the bucket, six attempts with backoff, each under a timeout.
{name}() {{
  local attempt
  for attempt in 1 2 3 4 5 6; do
    timeout --kill-after=10 120 aws s3 cp --only-show-errors --region "$fm_region" "s3://$fm_bucket/$1" "$2" && return 0
    [ "$attempt" -eq 6 ] && return 1
    sleep $((attempt * ${{FMCLUSTER_RETRY_DELAY:-10}}))
  done
}}"""


def read_pointer_shell(*, bucket: str, region: str, key: str, group: str) -> str:
    """Shell lines (bash, ``set -euo pipefail``) that read the pointer, fetch the runtime it names, check its sha256,
    unpack it as a package and write the profile and BOOT_ENV. ``FMCLUSTER_ROOT`` (unset on nodes) prefixes every
    path, and ``FMCLUSTER_RETRY_DELAY`` (default 10 s) paces the retries, for tests."""
    return f"""fm_root=${{FMCLUSTER_ROOT:-}}
fm_etc=$fm_root/etc/fmcluster fm_home=$fm_root/opt/fmcluster fm_state=$fm_root/var/lib/fmcluster
install -d -m 0755 "$fm_etc" "$fm_home/pkg/fmcluster" "$fm_root/var/log/fmcluster"
exec >>"$fm_root/var/log/fmcluster/user-data.log" 2>&1
fm_bucket={quote(bucket)} fm_region={quote(region)} fm_pointer={quote(key)} fm_group={quote(group)}
# fmcluster_boot_failed WHAT WHY: a node that cannot learn what to run has failed its boot; said where the
# validator's verdict goes (the EKS node gate reads it) and to the journal, and user data stops.
fmcluster_boot_failed() {{
  echo "$(date -Is) fmcluster: boot failed (boot.$1): $2"
  timeout 10 logger -t fmcluster -p user.err -- "boot failed (boot.$1): $2" || true
  install -d -m 0755 "$fm_state"
  printf '{{"verdict": "fail", "failing": ["boot.%s"], "error": "%s"}}\\n' "$1" "$2" >"$fm_state/.validation.json.tmp"
  mv -f "$fm_state/.validation.json.tmp" "$fm_state/validation.json"
  exit 1
}}
{fetch_function_shell("fmcluster_fetch")}
fmcluster_fetch "$fm_pointer" "$fm_etc/boot.json" || fmcluster_boot_failed pointer "cannot read s3://$fm_bucket/$fm_pointer"
timeout 60 python3 - "$fm_etc/boot.json" "$fm_etc" "$fm_group" <<'FMCLUSTER_POINTER' \\
  || fmcluster_boot_failed pointer "s3://$fm_bucket/$fm_pointer is not a boot pointer for $fm_group (log above)"
{_READER}FMCLUSTER_POINTER
# shellcheck disable=SC1091
. "$fm_etc/boot.env"
fmcluster_fetch "$FMCLUSTER_RUNTIME_KEY" "$fm_home/runtime.zip" \\
  || fmcluster_boot_failed runtime "cannot fetch s3://$fm_bucket/$FMCLUSTER_RUNTIME_KEY"
echo "$FMCLUSTER_RUNTIME_SHA256  $fm_home/runtime.zip" | timeout 60 sha256sum -c --status \\
  || fmcluster_boot_failed runtime "s3://$fm_bucket/$FMCLUSTER_RUNTIME_KEY does not match its sha256 in the pointer"
rm -rf "$fm_home/pkg/fmcluster/runtime"
timeout 300 python3 -m zipfile -e "$fm_home/runtime.zip" "$fm_home/pkg/fmcluster/runtime" \\
  || fmcluster_boot_failed runtime "cannot unpack $fm_home/runtime.zip"
touch "$fm_home/pkg/fmcluster/__init__.py"
"""


def run_bootstrap_shell() -> str:
    """The line that runs the runtime's bootstrap with the level and policy the pointer named."""
    return (f"set -a\n# shellcheck disable=SC1091\n. {BOOT_ENV}\nset +a\n"
            "bash /opt/fmcluster/pkg/fmcluster/runtime/node_bootstrap.sh\n")

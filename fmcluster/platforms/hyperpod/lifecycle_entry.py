"""The HyperPod lifecycle entry: a fixed script per instance group that reads the group's pointer, fetches the runtime
it names, checks its sha256, unpacks it and runs the lifecycle script in it.

An instance group's ``LifeCycleConfig`` (``SourceS3Uri`` and the ``OnCreate``/``OnInitComplete`` file name) is part
of the instance group: changing it is an instance-group update. So it names only this entry, whose text depends on
the bucket, the region, the group and the lifecycle script's name, none of which change with an fmcluster release,
the validation settings or the collectors. What does change is published beside it, outside the prefix HyperPod
downloads:

    runtime/<sha256>.zip        the node runtime (constructs/runtime_archive.py), never pruned while the stack lives
    boot/groups/<group>.json    {"schema": 1, "group": G, "runtime": {"key": "runtime/<sha256>.zip", "sha256": ...},
                                 "parameters": {...the lifecycle parameters...}, "profile": {...NodeProfile...} | null}

The pointer is one object, rewritten in one PUT, and the runtime it names is immutable: a node created during a
deploy reads either the old pointer and the old runtime or the new ones, never a mix of files. A pointer that cannot
be read, does not parse, names another group, or a runtime whose sha256 differs from the pointer's, fails the entry
with one line ``fmcluster lifecycle FAILED at step boot: ...`` and exit 1: HyperPod reports a failed lifecycle script
as the node's failure (docs/changes.md, "Routine changes", says what HyperPod does then).
"""

from __future__ import annotations

import json
from pathlib import Path
from shlex import quote
from typing import Any, Dict, Mapping, Optional

from fmcluster.constructs.boot_pointer import SCHEMA, fetch_function_shell
from fmcluster.constructs.boot_pointer import group_key as pointer_key
from fmcluster.constructs.runtime_archive import KEY_PREFIX as RUNTIME_PREFIX
from fmcluster.constructs.runtime_archive import archive_path, object_key

# The lifecycle scripts, one per hook: this platform's node folder, which the runtime archive carries at its path in
# the package (constructs/runtime_archive.py), so on the node below pkg/fmcluster/runtime/.
NODE_DIR = Path(__file__).resolve().parent / "node"
RUNTIME_SCRIPTS = {"OnInitComplete": "on_init_complete.sh", "OnCreate": "on_create_eks.sh"}


def pointer_document(*, group: str, runtime_key: str, sha256: str, parameters: Mapping[str, Any],
                     profile_json: Optional[str], reports: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """One group's pointer (`profile_json` None: a group without boot validation, e.g. the Slurm controller).
    `parameters` may hold deploy-time tokens (the file system's address); `reports`: where the group's nodes put
    their node reports (runtime/node_report.py), which the reader below ignores."""
    if runtime_key != object_key(sha256):
        raise ValueError(f"runtime_key: {runtime_key!r} must be {RUNTIME_PREFIX}<sha256>.zip")
    document = {"schema": SCHEMA, "group": group, "runtime": {"key": runtime_key, "sha256": sha256},
                "parameters": dict(parameters),
                "profile": json.loads(profile_json) if profile_json is not None else None}
    if reports is not None:
        document["reports"] = dict(reports)
    return document


# Runs under python3 (3.9+, standard library) on the node. Arguments: the pointer file, the staging directory, the
# group. Writes the parameters and the profile where the lifecycle script looks (beside its pkg/), prints the runtime's
# key and sha256.
_READER = """import json, os, re, sys
path, stage, group = sys.argv[1:4]
try:
    with open(path) as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict) or doc.get("schema") != @SCHEMA@:
        raise ValueError(f"schema {doc.get('schema') if isinstance(doc, dict) else None!r}; this entry reads @SCHEMA@")
    if doc.get("group") != group:
        raise ValueError(f"it names group {doc.get('group')!r}, this node is in {group!r}")
    digest, key = doc["runtime"]["sha256"], doc["runtime"]["key"]
    if not (isinstance(digest, str) and re.fullmatch("[0-9a-f]{64}", digest) and key == f"@RUNTIME@{digest}.zip"):
        raise ValueError("runtime is not a @RUNTIME@<sha256>.zip key with its sha256")
    parameters, profile = doc.get("parameters"), doc.get("profile")
    if not isinstance(parameters, dict):
        raise ValueError("parameters is not an object")
    if profile is not None and not isinstance(profile, dict):
        raise ValueError("profile is not an object")
except (OSError, ValueError, KeyError, TypeError) as error:
    print(f"pointer {path}: {error}", file=sys.stderr)
    sys.exit(1)
with open(os.path.join(stage, "fmcluster_parameters.json"), "w") as out:
    json.dump(parameters, out, indent=2)
if profile is not None:
    os.makedirs(os.path.join(stage, "profiles"), exist_ok=True)
    with open(os.path.join(stage, "profiles", f"{group}.json"), "w") as out:
        json.dump(profile, out)
print(key, digest)
""".replace("@SCHEMA@", str(SCHEMA)).replace("@RUNTIME@", RUNTIME_PREFIX)


def entry_script(*, bucket: str, region: str, group: str, hook: str) -> str:
    """The entry HyperPod runs for `group` under `hook` (its text must stay the same across routine changes).

    ``FMCLUSTER_LIFECYCLE_ROOT`` (unset on nodes) prefixes the staging directory and ``FMCLUSTER_RETRY_DELAY``
    (default 10 s) paces the retries, for tests; every command runs under a timeout."""
    script = RUNTIME_SCRIPTS[hook]
    node_dir = archive_path(NODE_DIR)
    pointer = pointer_key(group)
    return f"""#!/bin/bash
# fmcluster: HyperPod {hook} entry of instance group {group}. Reads the group's pointer, fetches the runtime it
# names, checks its sha256, unpacks it and runs its {node_dir}/{script} (fmcluster/platforms/hyperpod/lifecycle_entry.py).
set -euo pipefail
fm_bucket={quote(bucket)} fm_region={quote(region)} fm_group={quote(group)} fm_pointer={quote(pointer)}
fm_stage="${{FMCLUSTER_LIFECYCLE_ROOT:-}}/var/lib/fmcluster/boot/$fm_group"
fm_fail() {{
  echo "fmcluster lifecycle FAILED at step boot: $*" >&2
  timeout 10 logger -t fmcluster -p user.err -- "lifecycle boot failed: $*" || true
  exit 1
}}
{fetch_function_shell("fm_fetch")}
rm -rf "$fm_stage"
install -d -m 0755 "$fm_stage/pkg/fmcluster/runtime"
fm_fetch "$fm_pointer" "$fm_stage/pointer.json" || fm_fail "cannot read s3://$fm_bucket/$fm_pointer"
fm_runtime=$(timeout 60 python3 - "$fm_stage/pointer.json" "$fm_stage" "$fm_group" <<'FMCLUSTER_POINTER'
{_READER}FMCLUSTER_POINTER
) || fm_fail "s3://$fm_bucket/$fm_pointer is not a lifecycle pointer for $fm_group"
read -r fm_key fm_sha256 <<<"$fm_runtime"
fm_fetch "$fm_key" "$fm_stage/runtime.zip" || fm_fail "cannot fetch s3://$fm_bucket/$fm_key"
echo "$fm_sha256  $fm_stage/runtime.zip" | timeout 60 sha256sum -c --status \\
  || fm_fail "s3://$fm_bucket/$fm_key does not match its sha256 in the pointer"
timeout 300 python3 -m zipfile -e "$fm_stage/runtime.zip" "$fm_stage/pkg/fmcluster/runtime" \\
  || fm_fail "cannot unpack $fm_stage/runtime.zip"
touch "$fm_stage/pkg/fmcluster/__init__.py"
exec bash "$fm_stage/pkg/fmcluster/runtime/{node_dir}/{script}" --group "$fm_group" "$@"
"""

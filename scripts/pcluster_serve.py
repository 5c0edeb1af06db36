#!/usr/bin/env python3
"""ParallelCluster's offline gates as one long-lived process: pcluster_validate.py and pcluster_update_check.py on
one request per line, so a caller with many configurations pays ParallelCluster's import once.

    .venv-pcluster/bin/python scripts/pcluster_serve.py < requests.jsonl

A request is one JSON line, {"op": "validate", "config": {...}, "cluster_name": N, "schema_only": false} or
{"op": "update", "base": {...}, "target": {...}, "cluster_name": N}; the answer is one JSON line, {"rc": exit code
the script would give, "result": the JSON it would print}. The blocked AWS calls are counted per request. Ends at
the end of its input.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict

# each gate script imports offline_aws (every AWS call blocked) before ParallelCluster; BLOCKED is that one list
import pcluster_update_check
import pcluster_validate
from offline_aws import BLOCKED


def answer(request: Dict[str, Any]) -> Dict[str, Any]:
    del BLOCKED[:]
    name = request.get("cluster_name", "fmcluster-offline")
    if request.get("op") == "validate":
        result = pcluster_validate.validate(request["config"], name, bool(request.get("schema_only")))
        rc = 0 if result["valid"] else 1
    elif request.get("op") == "update":
        result = pcluster_update_check.check(request["base"], request["target"], name)
        rc = 0 if result["allowed"] else 1
    else:
        return {"rc": 2, "result": {"errors": [f"unknown op {request.get('op')!r}: validate or update"]}}
    # the result holds BLOCKED itself: serialize before the next request empties it
    return {"rc": rc, "result": json.loads(json.dumps(result, default=str))}


def main() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = answer(json.loads(line))
        except (ValueError, KeyError, TypeError) as e:
            reply = {"rc": 2, "result": {"errors": [f"{type(e).__name__}: {e}"]}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

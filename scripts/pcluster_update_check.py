#!/usr/bin/env python3
"""Would AWS ParallelCluster accept an update from one cluster configuration to another? Offline, with
ParallelCluster's own update checker.

    .venv-pcluster/bin/python scripts/pcluster_update_check.py BASE.{json,yaml} TARGET.{json,yaml} [--cluster-name NAME]

Runs in the virtualenv `make setup` creates from requirements-pcluster.lock, like scripts/pcluster_validate.py.
``pcluster.config.config_patch.ConfigPatch(cluster, base, target).check()`` is what ParallelCluster runs on every
``update-cluster`` (the CloudFormation provider's Lambda calls it on an UPDATE of ``Custom::PclusterCluster``): it
lists every changed parameter with the update policy ParallelCluster's schema declares for it (SUPPORTED,
QUEUE_UPDATE_STRATEGY, COMPUTE_FLEET_STOP, UNSUPPORTED, ...) and decides whether the update may proceed.

The cluster it checks against is a stand-in for the worst case of a running cluster: compute fleet running
(``has_running_capacity``), no login nodes, head node running. Every botocore API call fails before credentials or
a socket are touched, as in pcluster_validate.py; blocked calls are listed.

Output (stdout): JSON {"allowed", "changes": [{"path", "parameter", "old", "new", "policy", "check", "reason",
"action_needed"}], "blocked_aws_calls"}. Exit: 0 allowed, 1 refused, 2 usage or unreadable configuration.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, Dict, List, Optional

import yaml
from offline_aws import BLOCKED  # before ParallelCluster is imported: it blocks every AWS call


class _Instance:
    state = "running"


class RunningCluster:
    """What ConfigPatch's update policies ask of the cluster being updated, answered for a running cluster."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stack_name = name  # ParallelCluster names its stack after the cluster
        self.head_node_instance = _Instance()

    def has_running_capacity(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def has_running_login_nodes(self, *args: Any, **kwargs: Any) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # anything else: unknown, as for a cluster without that feature
        return None


def check(base: Dict[str, Any], target: Dict[str, Any], cluster_name: str) -> Dict[str, Any]:
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("pcluster").setLevel(logging.CRITICAL)
    from pcluster.config.config_patch import ConfigPatch

    patch = ConfigPatch(RunningCluster(cluster_name), base, target)
    allowed, rows = patch.check()
    header, body = rows[0], rows[1:]
    changes: List[Dict[str, Any]] = []
    for row in body:
        r = dict(zip(header, row))
        changes.append({"path": list(r["param_path"]), "parameter": r["parameter"], "old": r["old value"],
                        "new": r["new value"], "policy": r["update_policy"], "check": r["check"],
                        "reason": r["reason"], "action_needed": r["action_needed"]})
    # changes check() does not print (IGNORED) are still changes: list their policy too
    printed = {(tuple(c["path"]), c["parameter"]) for c in changes}
    for change in patch.changes:
        if (tuple(change.path), change.key) not in printed:
            changes.append({"path": list(change.path), "parameter": change.key, "old": change.old_value,
                            "new": change.new_value, "policy": change.update_policy.name, "check": "NOT PRINTED",
                            "reason": None, "action_needed": None})
    return {"allowed": bool(allowed), "changes": changes, "blocked_aws_calls": BLOCKED}


def _read(path: str) -> Optional[Dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    return data if isinstance(data, dict) else None


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="pcluster_update_check.py", description=__doc__.splitlines()[0])
    ap.add_argument("base", help="the configuration the cluster runs, JSON or YAML")
    ap.add_argument("target", help="the configuration to update it to, JSON or YAML")
    ap.add_argument("--cluster-name", default="fmcluster-offline")
    args = ap.parse_args(argv)
    try:
        base, target = _read(args.base), _read(args.target)
    except (OSError, ValueError, yaml.YAMLError) as e:
        print(json.dumps({"allowed": False, "errors": [str(e)]}))
        return 2
    if base is None or target is None:
        print(json.dumps({"allowed": False, "errors": ["a configuration is not a mapping"]}))
        return 2
    result = check(base, target, args.cluster_name)
    print(json.dumps(result, indent=2, default=str))
    return 0 if result["allowed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

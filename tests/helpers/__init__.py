"""Helpers shared by tests (importable as `helpers`: pytest's pythonpath is tests/): template readers here,
`helpers.aws` (specs, contexts and stubs for the boto3 paths), `helpers.lifecycle` (HyperPod lifecycle inputs),
`helpers.parallelcluster` (its specs, rendered configuration and offline gates), `helpers.planner`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List

ROOT = Path(__file__).resolve().parents[2]


def resources_of(template: Dict[str, Any], type_: str) -> Dict[str, Dict[str, Any]]:
    return {k: v for k, v in template.get("Resources", {}).items() if v["Type"] == type_}


def policy_statements(template: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    """Every statement of every IAM policy, role, managed policy, bucket/topic/key policy."""
    for res in template.get("Resources", {}).values():
        props = res.get("Properties", {})
        docs: List[Any] = []
        for key in ("PolicyDocument", "KeyPolicy", "AssumeRolePolicyDocument"):
            if key in props:
                docs.append(props[key])
        for pol in props.get("Policies", []) or []:
            docs.append(pol.get("PolicyDocument", {}))
        for doc in docs:
            if isinstance(doc, dict):
                stmts = doc.get("Statement", [])
                yield from (stmts if isinstance(stmts, list) else [stmts])


def actions_of(statement: Dict[str, Any]) -> List[str]:
    a = statement.get("Action", statement.get("NotAction", []))
    return [a] if isinstance(a, str) else list(a)


def boot_pointers(template: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The boot pointers a cluster template publishes (key -> document), as the metadata of the deployment that writes
    them (fmcluster/constructs/boot_pointer.py). A null the document holds (the login node's profile) is absent here:
    CloudFormation templates drop nulls."""
    from fmcluster.constructs.node_bootstrap import POINTERS_METADATA

    found: Dict[str, Dict[str, Any]] = {}
    for res in resources_of(template, "Custom::CDKBucketDeployment").values():
        found.update(res.get("Metadata", {}).get(POINTERS_METADATA, {}))
    return found


def group_profile(template: Dict[str, Any], group: str) -> Dict[str, Any]:
    """The NodeProfile a group's nodes read at boot, from its pointer."""
    return boot_pointers(template)[f"boot/groups/{group}.json"]["profile"]

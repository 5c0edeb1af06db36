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

"""Logical ids CDK gives resources, computed ahead of time, for resources that must keep the id they had
before a refactoring moved them in the construct tree (a changed id replaces the resource on update); and
`pin_logical_id`, which fixes a stateful resource's id whatever its place in the tree."""

from __future__ import annotations

import hashlib
import re
from typing import List

from aws_cdk import CfnElement
from constructs import Construct

# aws-cdk-lib core/lib/private/uniqueid.ts (makeUniqueId): "Default" path components are dropped, the human
# part leaves out "Resource", and the id ends in the first 8 hex digits of the MD5 of the path joined by "/".
HIDDEN = "Default"
HIDDEN_FROM_HUMAN = "Resource"
HASH_LEN = 8
MAX_HUMAN_LEN = 240


def _dedupe(components: List[str]) -> List[str]:
    """CDK drops a component the previous one ends with (``Bucket/BucketPolicy`` ... ``PolicyPolicy``)."""
    out: List[str] = []
    for c in components:
        if not out or not out[-1].endswith(c):
            out.append(c)
    return out


def logical_id(*path: str) -> str:
    """The logical id of a resource at `path` below its stack, e.g. ``logical_id("GpuPlacement", "Resource")``."""
    components = [c for c in path if c != HIDDEN]
    if not components:
        raise ValueError("path: needs at least one component besides Default")
    if len(components) == 1:
        return re.sub(r"[^A-Za-z0-9]", "", components[0])
    digest = hashlib.md5("/".join(components).encode(), usedforsecurity=False).hexdigest()[:HASH_LEN].upper()
    human = "".join(re.sub(r"[^A-Za-z0-9]", "", c) for c in _dedupe(components) if c != HIDDEN_FROM_HUMAN)
    return human[:MAX_HUMAN_LEN] + digest


def pin_logical_id(construct: Construct, logical_id: str) -> None:
    """Fix a stateful resource's logical id so refactoring the construct tree never replaces it."""
    cfn = construct if isinstance(construct, CfnElement) else construct.node.default_child
    if not isinstance(cfn, CfnElement):
        raise TypeError(f"{construct.node.path} is not a CloudFormation element")
    cfn.override_logical_id(logical_id)

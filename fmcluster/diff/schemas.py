"""CloudFormation's own replacement rules: the `createOnlyProperties` of each resource provider schema.

A property listed there cannot be updated in place: CloudFormation replaces the resource when it changes
(https://docs.aws.amazon.com/cloudformation-cli/latest/userguide/resource-type-schema.html). cfn-lint ships the
schemas of every region in its package data (providers/<region>.json maps a type to a schema file under
resources/), so they load offline; without cfn-lint the rules are unknown and the report says so.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Dict, Optional, Tuple

Path_ = Tuple[str, ...]


@cache
def _schema_root() -> Optional[Path]:
    """cfn-lint's package data, found without importing cfn-lint (its import takes seconds; only files are read)."""
    from importlib.util import find_spec

    try:
        found = find_spec("cfnlint")
    except (ImportError, ValueError):
        return None
    locations = list(found.submodule_search_locations or []) if found is not None else []
    if not locations:
        return None
    root = Path(locations[0]) / "data" / "schemas"
    return root if (root / "providers").is_dir() else None


def available() -> bool:
    return _schema_root() is not None


@cache
def _index(region: str) -> Dict[str, str]:
    root = _schema_root()
    if root is None:
        return {}
    path = root / "providers" / f"{region}.json"
    if not path.is_file():
        path = root / "providers" / "us-east-1.json"
    return dict(json.loads(path.read_text()))


@cache
def create_only(resource_type: str, region: str = "us-east-1") -> Optional[Tuple[Path_, ...]]:
    """The create-only property paths of a type (``("BucketName",)``, ``*`` for any
    list item), or None when no schema is known for it (custom resources, or cfn-lint missing)."""
    root = _schema_root()
    digest = _index(region).get(resource_type)
    if root is None or digest is None:
        return None
    schema = json.loads((root / "resources" / f"{digest}.json").read_text())
    paths = []
    for pointer in schema.get("createOnlyProperties", []):
        parts = tuple(pointer.split("/")[1:])
        if parts and parts[0] == "properties":
            paths.append(parts[1:])
    return tuple(paths)

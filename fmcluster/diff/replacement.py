"""Does a property change replace the resource? The provider schema first, then documented facts it lacks.

Some schemas are incomplete: the CloudFormation reference says "Update requires: Replacement" for properties the
schema does not list as create-only. The stores declare such facts of their resources, each with the page that states
it (`ChangeRules.create_only`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from fmcluster.diff import schemas
from fmcluster.diff.storage import create_only

Path_ = Tuple[str, ...]

def changed_paths(old: Any, new: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """The deepest property paths whose values differ (list items by index)."""
    if isinstance(old, dict) and isinstance(new, dict) and not _intrinsic(old) and not _intrinsic(new):
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                if key in old and key in new:
                    yield from changed_paths(old[key], new[key], prefix + (key,))
                else:
                    yield prefix + (key,)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            if a != b:
                yield from changed_paths(a, b, prefix + (str(i),))
    elif old != new:
        yield prefix


def _intrinsic(value: Dict[str, Any]) -> bool:
    return len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref"))


def _covers(rule: Path_, changed: Path_) -> bool:
    """A change at `changed` touches the create-only `rule` when one is a prefix of the other."""
    n = min(len(rule), len(changed))
    return all(r == "*" or r == c for r, c in zip(rule[:n], changed[:n]))


@dataclass
class Verdict:
    replaced: Optional[bool]  # None: unknown (no schema: a custom resource, or cfn-lint missing)
    because: List[str] = field(default_factory=list)  # the create-only paths (and sources) that decide it


def judge(resource_type: str, paths: Sequence[Path_], region: str = "us-east-1") -> Verdict:
    """Whether changing `paths` of a `resource_type` replaces it."""
    because = []
    for (rtype, rule), source in create_only().items():
        if rtype == resource_type and any(_covers(rule, p) for p in paths):
            because.append(f"{'.'.join(rule)} (documented: {source})")
    rules = schemas.create_only(resource_type, region)
    if rules is None and not because:
        return Verdict(None, [])
    for rule in rules or ():
        if any(_covers(rule, p) for p in paths):
            because.append(f"{'.'.join(rule)} (create-only in the provider schema)")
    return Verdict(bool(because), because)

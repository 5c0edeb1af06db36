"""What a deploy does to each resource of each stack: added, removed, modified in place or replaced.

Two templates are compared resource by resource (same logical id, same stack). A value that is the same text in
both templates still changes when it names a resource that is replaced (``Ref``/``Fn::GetAtt``), a launch
template's new version (``LatestVersionNumber``), or an export whose value changes (``Fn::ImportValue``); such
references are followed until nothing more changes, within and across stacks, as CloudFormation resolves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from fmcluster.diff.replacement import Path_, Verdict, changed_paths, judge

Template = Dict[str, Any]
ADDED, REMOVED, MODIFIED, REPLACED = "added", "removed", "modified", "replaced"
_VERSION_ATTRIBUTES = ("LatestVersionNumber", "DefaultVersionNumber")


@dataclass
class ResourceChange:
    stack: str
    logical_id: str
    type: str
    action: str  # added | removed | modified | replaced
    paths: List[Path_] = field(default_factory=list)
    because: List[str] = field(default_factory=list)
    replacement_known: bool = True  # False: no schema says (custom resource, nested stack); reported as such
    old: Optional[Dict[str, Any]] = None
    new: Optional[Dict[str, Any]] = None

    @property
    def where(self) -> str:
        return f"{self.stack}/{self.logical_id}"

    def policy(self, name: str) -> str:
        """DeletionPolicy or UpdateReplacePolicy of the old resource (CloudFormation's default: Delete)."""
        return str((self.old or self.new or {}).get(name, "Delete"))


@dataclass
class ExportChange:
    stack: str
    name: str
    action: str  # removed | changed
    importers: List[str]  # stacks whose current (old) template imports it


class _Volatile:
    """What will have a new value after the deploy: replaced resources, new launch template versions, exports."""

    def __init__(self) -> None:
        self.replaced: Dict[str, Set[str]] = {}
        self.modified: Dict[str, Set[str]] = {}
        self.exports: Set[str] = set()

    def resolve(self, stack: str, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(stack, v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            replaced, modified = self.replaced.get(stack, set()), self.modified.get(stack, set())
            if key == "Ref" and arg in replaced:
                return {"fmcluster:new-value-of": arg}
            if key == "Fn::GetAtt" and isinstance(arg, list) and arg:
                if arg[0] in replaced or (arg[0] in modified and arg[-1] in _VERSION_ATTRIBUTES):
                    return {"fmcluster:new-value-of": ".".join(map(str, arg))}
            if key == "Fn::ImportValue" and isinstance(arg, str) and arg in self.exports:
                return {"fmcluster:new-value-of": arg}
        return {k: self.resolve(stack, v) for k, v in value.items()}


def _resources(template: Optional[Template]) -> Dict[str, Dict[str, Any]]:
    return dict((template or {}).get("Resources", {}))


def _shape(resource: Dict[str, Any]) -> Dict[str, Any]:
    """What a deploy acts on: everything but Metadata (CDK's construct path)."""
    return {k: v for k, v in resource.items() if k != "Metadata"}


def _stack_changes(stack: str, old: Optional[Template], new: Optional[Template], volatile: _Volatile,
                   region: str, decided: Dict[Tuple[str, str], str]) -> List[ResourceChange]:
    before, after = _resources(old), _resources(new)
    out: List[ResourceChange] = []
    for lid in sorted(set(before) | set(after)):
        a, b = before.get(lid), after.get(lid)
        if a is None:
            out.append(ResourceChange(stack, lid, b["Type"], ADDED, new=b))  # type: ignore[index]
            continue
        if b is None:
            out.append(ResourceChange(stack, lid, a["Type"], REMOVED, old=a))
            continue
        if a["Type"] != b["Type"]:
            out.append(ResourceChange(stack, lid, b["Type"], REPLACED, [("Type",)], ["Type changed"], old=a, new=b))
            continue
        resolved = volatile.resolve(stack, _shape(b))
        old_props, new_props = a.get("Properties", {}), resolved.get("Properties", {})
        prop_paths = list(changed_paths(old_props, new_props))
        other = [k for k in set(_shape(a)) | set(resolved) if k != "Properties" and _shape(a).get(k) != resolved.get(k)]
        if not prop_paths and not other:
            continue
        verdict = judge(a["Type"], prop_paths, region) if prop_paths else Verdict(False)
        if (stack, lid) in decided:  # a change set's Replacement field: CloudFormation's own answer
            said = decided[(stack, lid)]
            verdict = Verdict(said in ("True", "Conditional"), [f"change set: Replacement {said}"])
        action = REPLACED if verdict.replaced else MODIFIED
        paths = prop_paths + [(k,) for k in sorted(other)]
        out.append(ResourceChange(stack, lid, a["Type"], action, paths, verdict.because,
                                  replacement_known=verdict.replaced is not None, old=a, new=b))
    return out


def _export_values(template: Optional[Template]) -> Dict[str, Any]:
    """Export name -> the value expression that feeds it."""
    out = {}
    for output in (template or {}).get("Outputs", {}).values():
        name = (output.get("Export") or {}).get("Name")
        if isinstance(name, str):
            out[name] = output.get("Value")
    return out


def _imports(template: Optional[Template]) -> Set[str]:
    found: Set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("Fn::ImportValue"), str):
                found.add(value["Fn::ImportValue"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk((template or {}).get("Resources", {}))
    walk((template or {}).get("Outputs", {}))
    return found


def compare_stacks(old: Dict[str, Template], new: Dict[str, Template], *, region: str = "us-east-1",
                   decided: Optional[Dict[Tuple[str, str], str]] = None,
                   ) -> Tuple[Dict[str, List[ResourceChange]], List[ExportChange]]:
    """Per stack, the resource changes from `old` to `new`; and the exports that change under an importer.
    `decided`: (stack, logical id) -> a change set's Replacement ("True", "False", "Conditional"), which wins."""
    volatile = _Volatile()
    stacks = sorted(set(old) | set(new))
    for _ in range(8):  # each round can only add to `volatile`; a cluster's reference chains are short
        result = {s: _stack_changes(s, old.get(s), new.get(s), volatile, region, decided or {}) for s in stacks}
        before = (sum(map(len, volatile.replaced.values())), sum(map(len, volatile.modified.values())),
                  len(volatile.exports))
        for s, changes in result.items():
            volatile.replaced.setdefault(s, set()).update(c.logical_id for c in changes if c.action == REPLACED)
            volatile.modified.setdefault(s, set()).update(c.logical_id for c in changes if c.action == MODIFIED)
            for name, value in _export_values(new.get(s)).items():
                if name in _export_values(old.get(s)) and (
                        volatile.resolve(s, value) != _export_values(old.get(s))[name]):
                    volatile.exports.add(name)
        after = (sum(map(len, volatile.replaced.values())), sum(map(len, volatile.modified.values())),
                 len(volatile.exports))
        if after == before:
            break
    exports: List[ExportChange] = []
    for s in stacks:
        old_exports, new_exports = _export_values(old.get(s)), _export_values(new.get(s))
        for name in sorted(old_exports):
            action = "removed" if name not in new_exports else "changed" if name in volatile.exports else ""
            importers = sorted(o for o in old if o != s and name in _imports(old[o]))
            if action and importers:
                exports.append(ExportChange(s, name, action, importers))
    return result, exports

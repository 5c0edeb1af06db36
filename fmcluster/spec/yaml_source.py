"""Spec YAML to plain data: libyaml's C parser where present, duplicate keys refused, every malformed file one
line with its position.

Safe loading only (no Python object tags). Merge keys (``<<: *base``, YAML 1.1 https://yaml.org/type/merge.html)
are supported: a key written in the mapping itself overrides a merged one, as that page specifies; a key written
twice in the same mapping is refused. libyaml refuses nesting deeper than 1000 levels
(https://github.com/yaml/libyaml/pull/287; older builds lack it); the pure-Python parser recurses instead, so a
RecursionError there is reported as too deep a nesting. What aliases expand to is bounded (`yaml_aliases`).
"""

from __future__ import annotations

import functools
from typing import Any, Set, Type

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node

from fmcluster.spec.base import SpecError, clipped_repr, one_line
from fmcluster.spec.yaml_aliases import AliasError, check_aliases

# Exceptions the safe constructors raise on a well-formed node with an impossible value (!!int abc, 2024-02-30,
# !!bool maybe, an integer past Python's 4300-digit conversion limit).
_VALUE_ERRORS = (ValueError, TypeError, KeyError, OverflowError, IndexError, AttributeError)


def _with_libyaml() -> bool:
    return bool(getattr(yaml, "__with_libyaml__", False))


class _StrictConstruction:
    """Mixed into a safe loader: aliases bounded before construction, positions on every construction error,
    duplicate keys refused."""

    def get_single_data(self) -> Any:
        node = self.get_single_node()  # type: ignore[attr-defined]
        if node is None:
            return None
        check_aliases(node)
        return self.construct_document(node)  # type: ignore[attr-defined]

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)  # type: ignore[misc]
        except _VALUE_ERRORS as e:
            kind = node.tag.rsplit(":", 1)[-1]
            shown = clipped_repr(node.value, 60) if isinstance(node.value, str) else f"a {getattr(node, 'id', 'node')}"
            raise ConstructorError(None, None, f"cannot read {kind} {shown} ({one_line(str(e), 200)})",
                                   node.start_mark) from None

    def construct_mapping(self, node: Node, deep: bool = False) -> Any:
        if isinstance(node, MappingNode):
            seen: Set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    hash(key)
                except TypeError:
                    raise ConstructorError("while constructing a mapping", node.start_mark,
                                           "found unhashable key", key_node.start_mark) from None
                if key in seen:
                    raise ConstructorError(None, None, f"duplicate key {clipped_repr(key, 80)}",
                                           key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)  # type: ignore[misc]


@functools.lru_cache(maxsize=2)
def _loader(c_parser: bool) -> Type[Any]:
    base: Type[Any] = yaml.CSafeLoader if c_parser else yaml.SafeLoader
    return type("SpecLoader", (_StrictConstruction, base), {})


def loader_class() -> Type[Any]:
    """The loader class `read_yaml` uses: the C parser when PyYAML was built with libyaml."""
    return _loader(_with_libyaml())


def read_yaml(text: str, label: str) -> Any:
    """`text` as plain data; a `SpecError` naming `label`, the line and the column for anything malformed."""
    try:
        return yaml.load(text, Loader=loader_class())  # noqa: S506 - a SafeLoader / CSafeLoader subclass
    except AliasError as e:
        mark = e.problem_mark
        raise SpecError([f"{label}: {e.what} at line {mark.line + 1}, column {mark.column + 1}: {e.problem}"]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError([f"{label}: not valid YAML{where}: {problem}"]) from None
    except RecursionError:
        raise SpecError([f"{label}: not valid YAML: nested too deeply for the parser; a spec is a few levels deep"]) \
            from None

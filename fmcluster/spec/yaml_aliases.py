"""A bound on what YAML aliases expand to, checked on the composed node graph before anything is constructed.

An alias (``*a``) stands for its anchor's whole value (``&a``), and the value may hold aliases itself, so a 1 KB file
can stand for billions of nodes ("billion laughs"). The parser shares the anchored node rather than copying it, but
everything after it (construction of merge keys, validation, error messages) walks the expanded value. A spec needs
few aliases (a shared node-group body, a merge key), so expanding past `MAX_ALIAS_NODES` is refused, naming the
collection where it happens; so is an alias inside the collection it names (a recursive value).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from yaml import YAMLError
from yaml.nodes import MappingNode, Node, SequenceNode

# Nodes that aliases may add to a document, over the nodes written in it. Far above what anchors in a spec need
# (32 node groups sharing a 50-node body add 1,600), far below what makes validation slow (about 0.1 s).
MAX_ALIAS_NODES = 10_000


class AliasError(YAMLError):
    """Aliases that expand too far, or a recursive one (`what`): `problem` at `mark`, the collection holding it."""

    def __init__(self, what: str, problem: str, mark: Any) -> None:
        super().__init__(f"{what}: {problem}")
        self.what, self.problem, self.problem_mark = what, problem, mark


def _children(node: Node) -> List[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def check_aliases(root: Node, limit: int = MAX_ALIAS_NODES) -> None:
    """Raise `AliasError` when the aliases under `root` add more than `limit` nodes, or one names a collection it is
    in. One pass over the distinct nodes (a node reached again through an alias is not walked again)."""
    size: Dict[int, int] = {}  # id(node) -> the node count of its expanded value, once walked
    open_: Set[int] = set()  # collections being walked: an alias to one of them is recursive
    added = 0
    stack: List[Tuple[Node, Optional[Node], bool]] = [(root, None, False)]
    while stack:
        node, parent, leaving = stack.pop()
        key = id(node)
        if leaving:
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            open_.discard(key)
            continue
        if key in size:  # reached again: an alias, which repeats the whole value
            added += size[key]
            if added > limit:
                raise AliasError("too many aliases", f"aliases expand the spec past {limit:,} nodes here (each *alias "
                                 "repeats its &anchor's whole value); a spec needs far fewer", (parent or node).start_mark)
            continue
        children = _children(node)
        if not children:
            size[key] = 1
            continue
        if key in open_:
            raise AliasError("recursive alias", "an alias names a collection it is inside of (a recursive value); a "
                             "spec cannot hold one", (parent or node).start_mark)
        open_.add(key)
        stack.append((node, parent, True))
        stack.extend((child, node, False) for child in reversed(children))

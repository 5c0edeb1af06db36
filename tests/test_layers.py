"""The package's layering, read from the imports themselves (function-level imports included; only
``if TYPE_CHECKING:`` blocks are left out, since they never run):

    runtime <- catalog <- spec <- constructs <- orchestration <- stacks <- app <- cli
                              \\<- aws (boto3: preflight, status), tools (plan)  <- cli

runtime (what runs on the nodes) imports nothing else of the package; constructs never import the spec
(they take plain props); nothing but the CLI imports the CLI; and no two modules import each other.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fmcluster"

def layer_of(module: str) -> str:
    parts = module.split(".")[1:]
    head = parts[0] if parts else ""
    if head in ("runtime", "catalog", "spec", "constructs", "stacks", "app", "aws", "cli"):
        return head
    if head == "feature_flags":
        return "app"  # the CDK context every app gets
    if head == "images":
        return "catalog"  # data, like the instance catalog
    if head in ("nag", "observability"):
        return "constructs"
    if head == "profiles":
        return "orchestration"
    if head in ("plan", "planner", "acceptance"):  # acceptance: reads nccl-tests logs against the plan
        return "tools"
    if head == "orchestrators":
        leaf = parts[-1]
        if len(parts) <= 2:  # the seam itself: kind.py, registry.py are data; context.py, ec2_nodes.py build
            return "orchestration" if leaf in ("context", "ec2_nodes") else "spec"
        if leaf in ("preflight", "status"):
            return "aws"
        if leaf in ("settings", "versions", parts[1]):  # its settings, pinned versions (data) and __init__
            return "spec"
        return "orchestration"  # the kind's construct and its own building blocks
    return "top"  # fmcluster/__init__.py, __main__.py


MAY_IMPORT: Dict[str, Set[str]] = {
    "runtime": {"runtime"},
    "catalog": {"runtime", "catalog"},
    "spec": {"runtime", "catalog", "spec"},
    "constructs": {"runtime", "catalog", "constructs"},
    "orchestration": {"runtime", "catalog", "spec", "constructs", "orchestration"},
    "stacks": {"runtime", "catalog", "spec", "constructs", "orchestration", "stacks"},
    "app": {"runtime", "catalog", "spec", "constructs", "orchestration", "stacks", "app"},
    "aws": {"runtime", "catalog", "spec", "aws"},
    "tools": {"runtime", "catalog", "spec", "tools"},
    "cli": {"runtime", "catalog", "spec", "constructs", "orchestration", "stacks", "app", "aws", "tools", "cli"},
    "top": {"app", "spec", "cli"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _runtime_imports(tree: ast.AST) -> Iterator[ast.AST]:
    """Import nodes, skipping `if TYPE_CHECKING:` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def lazy_homes(path: Path) -> Dict[str, str]:
    """A package that loads its names on first use (``_HOMES = {name: submodule}`` and ``__getattr__``,
    as fmcluster.spec does): importing a name from it imports that submodule."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and "_HOMES" in ast.unparse(node).split("=")[0]:
            return {str(k): str(v) for k, v in ast.literal_eval(node.value).items()}  # type: ignore[arg-type]
    return {}


def imports_of(module: str, path: Path, known: Dict[str, Path]) -> Set[str]:
    """The fmcluster modules `module` imports: ``from pkg import name`` counts as ``pkg.name`` when that is a
    module (or the submodule a lazy package loads it from), else as ``pkg`` itself."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: Set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            homes = lazy_homes(known[base]) if base in known and known[base].name == "__init__.py" else {}
            names = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    names.append(sub)
                elif alias.name in homes:
                    names.append(f"{base}.{homes[alias.name]}")
                else:
                    names.append(base)
        for name in names:
            if name in known and name != module:
                found.add(name)
    return found


def graph() -> Dict[str, Set[str]]:
    known = modules()
    return {m: imports_of(m, p, known) for m, p in known.items()}


def test_every_import_respects_the_layers():
    wrong = sorted(
        f"{m} ({layer_of(m)}) imports {i} ({layer_of(i)})"
        for m, deps in graph().items()
        for i in deps
        if layer_of(i) not in MAY_IMPORT[layer_of(m)]
    )
    assert not wrong, "\n".join(wrong)


def test_no_two_modules_import_each_other_even_indirectly():
    g = graph()
    cycles: Set[Tuple[str, ...]] = set()

    def visit(node: str, path: Tuple[str, ...]) -> None:
        for nxt in g[node]:
            if nxt in path:
                cycle = path[path.index(nxt):]
                start = cycle.index(min(cycle))
                cycles.add(cycle[start:] + cycle[:start])
            elif nxt not in done:
                visit(nxt, path + (nxt,))
        done.add(node)

    done: Set[str] = set()
    for m in sorted(g):
        if m not in done:
            visit(m, (m,))
    assert not cycles, "\n".join(" -> ".join(c + (c[0],)) for c in sorted(cycles))


def test_the_layer_test_sees_what_it_must():
    """Guard the guard: the imports that were cycles before are seen, function-level ones included."""
    g = graph()
    assert "fmcluster.cli.aws_commands" in g["fmcluster.cli"]
    assert "fmcluster.spec.loading" in g["fmcluster.cli.spec_commands"]  # function-level, through spec's lazy names
    assert layer_of("fmcluster.orchestrators.pcs.construct") == "orchestration"
    assert layer_of("fmcluster.orchestrators.pcs.settings") == "spec"

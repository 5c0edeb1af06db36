"""The package's layering, read from the imports themselves (function-level imports included):

    runtime <- catalog <- spec <- constructs <- orchestration <- stacks <- app <- cli
                              \\<- aws (boto3: preflight, status), tools (plan)  <- cli
    outputs (files written for the user) <- tools, cli
    spec, orchestration, aws <- kinds (each kind's declaration) <- composition (fmcluster/registry.py) <- app, tools, cli

runtime (what runs on the nodes) imports nothing else of the package, and a platform's or kind's node folder
(``<platforms|orchestrators>/<name>/node/``, shipped to the nodes inside the runtime archive) imports only the runtime,
and no other layer imports it: on a node it sits below fmcluster/runtime, not at its package path. Both import the
standard library and nothing else outside fmcluster (Python 3.9 syntax). Constructs never import the spec
(they take plain props); the spec never imports a kind or the registry; nothing but the CLI imports the CLI; and no
two modules import each other, even indirectly, counting ``if TYPE_CHECKING:`` imports too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Dict, Iterator, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fmcluster"

# Modules of a kind or platform that are data read by the spec (settings models, pinned versions, constants, a
# node-local storage tier's declaration).
SPEC_LEAVES = ("settings", "versions", "addresses", "node_checks", "tier")
# The storage contract's modules beside its __init__ (a store is a folder there, these are files): the mount forms,
# built only at synth, and the services' names.
CONTRACT_MODULES = ("forms", "services")


def layer_of(module: str) -> str:
    parts = module.split(".")[1:]
    head = parts[0] if parts else ""
    if head in ("runtime", "catalog", "spec", "constructs", "stacks", "app", "aws", "cli"):
        return head
    if head == "registry":
        return "composition"  # the kinds fmcluster knows and the spec model they compose
    if head == "feature_flags":
        return "app"  # the CDK context every app gets
    if head == "images":
        return "catalog"  # data, like the instance catalog
    if head in ("nag", "observability"):
        return "constructs"
    if head == "profiles":
        return "orchestration"
    if head == "outputs":
        return "outputs"  # files written for the user: signed, never over one fmcluster did not write
    # acceptance: reads nccl-tests logs against the plan; posttraining: the post-training jobs' pins and scripts
    if head in ("plan", "planner", "acceptance", "diff", "posttraining"):
        return "tools"
    if head == "platforms" and len(parts) >= 3 and parts[1] == "storage":
        # a store's folder (platforms/storage/<store>/) is laid out as a kind's: its declaration, and its modules
        # (fmcluster.platforms.storage itself, the contract, is a platform's __init__: spec)
        if len(parts) == 3 and parts[2] in CONTRACT_MODULES:
            return "spec"  # the contract's own modules, as its __init__
        if len(parts) == 3:
            return "kinds"  # the store's declaration: its methods import their modules on call
        if len(parts) > 4 and parts[3] == "node":
            return "node"
        parts = parts[:1] + parts[2:]  # judged below as platforms/<store>/...
    if head in ("orchestrators", "platforms"):
        leaf = parts[-1]
        if len(parts) > 3 and parts[2] == "node":
            return "node"  # a platform's or kind's node-side code, shipped in the runtime archive
        if module in ("fmcluster.orchestrators", "fmcluster.platforms"):
            return "spec"
        if head == "orchestrators" and len(parts) == 2 and parts[1] != "context":
            return "kinds"  # the seam (kind.py) and each kind's declaration: its methods import their modules on call
        if leaf in ("preflight", "status"):
            return "aws"
        if leaf in SPEC_LEAVES or (head == "platforms" and len(parts) == 2):
            return "spec"
        return "orchestration"  # constructs a kind or platform builds, and the context it builds from
    return "top"  # fmcluster/__init__.py, __main__.py


MAY_IMPORT: Dict[str, Set[str]] = {
    "runtime": {"runtime"},
    "node": {"runtime"},
    "catalog": {"runtime", "catalog"},
    "spec": {"runtime", "catalog", "spec"},
    "constructs": {"runtime", "catalog", "constructs"},
    "orchestration": {"runtime", "catalog", "spec", "constructs", "orchestration"},
    "stacks": {"runtime", "catalog", "spec", "constructs", "orchestration", "stacks"},
    "aws": {"runtime", "catalog", "spec", "aws"},
    "kinds": {"runtime", "catalog", "spec", "constructs", "orchestration", "aws", "kinds"},
    "composition": {"runtime", "catalog", "spec", "kinds", "composition"},
    "app": {"runtime", "catalog", "spec", "constructs", "orchestration", "stacks", "composition", "app"},
    "outputs": {"outputs"},
    "tools": {"runtime", "catalog", "spec", "composition", "outputs", "tools"},
    "cli": {"runtime", "catalog", "spec", "constructs", "orchestration", "stacks", "app", "aws", "kinds",
            "composition", "outputs", "tools", "cli"},
    "top": {"app", "spec", "composition", "cli"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(tree: ast.AST, type_checking: bool) -> Iterator[ast.AST]:
    """Import nodes; those in `if TYPE_CHECKING:` bodies only with `type_checking`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not type_checking:
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


def imports_of(module: str, path: Path, known: Dict[str, Path], type_checking: bool = False) -> Set[str]:
    """The fmcluster modules `module` imports: ``from pkg import name`` counts as ``pkg.name`` when that is a
    module (or the submodule a lazy package loads it from), else as ``pkg`` itself."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: Set[str] = set()
    for node in _imports(ast.parse(path.read_text(), str(path)), type_checking):
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


def graph(type_checking: bool = False) -> Dict[str, Set[str]]:
    """Module -> the fmcluster modules it imports; with `type_checking`, those under TYPE_CHECKING too."""
    known = modules()
    return {m: imports_of(m, p, known, type_checking) for m, p in known.items()}


def test_every_import_respects_the_layers():
    wrong = sorted(
        f"{m} ({layer_of(m)}) imports {i} ({layer_of(i)})"
        for m, deps in graph().items()
        for i in deps
        if layer_of(i) not in MAY_IMPORT[layer_of(m)]
    )
    assert not wrong, "\n".join(wrong)


def test_no_two_modules_import_each_other_even_indirectly_counting_type_checking_imports():
    g = graph(type_checking=True)
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
    """Guard the guard: function-level and TYPE_CHECKING imports are seen, and the modules land in their layers."""
    g, typed = graph(), graph(type_checking=True)
    assert "fmcluster.cli.aws_commands" in g["fmcluster.cli"]
    # a folder whose __init__ only describes it (the instance NVMe tier: nothing to build) declares no methods
    declarations = [m for m in g if layer_of(m) == "kinds" and m != "fmcluster.orchestrators.kind" and g[m]]
    assert declarations and all(any(layer_of(i) == "orchestration" for i in g[m]) for m in declarations)  # in bind
    assert "fmcluster.orchestrators.context" in typed["fmcluster.orchestrators.kind"]  # TYPE_CHECKING only
    assert "fmcluster.orchestrators.context" not in g["fmcluster.orchestrators.kind"]
    assert layer_of("fmcluster.orchestrators.somekind.construct") == "orchestration"
    assert layer_of("fmcluster.orchestrators.somekind.settings") == "spec"
    assert layer_of("fmcluster.orchestrators.somekind") == "kinds" and layer_of("fmcluster.orchestrators.kind") == "kinds"
    assert layer_of("fmcluster.platforms.kubernetes.settings") == "spec"
    assert layer_of("fmcluster.platforms.kubernetes.preflight") == "aws"
    assert layer_of("fmcluster.platforms.hyperpod.cluster") == "orchestration"
    assert layer_of("fmcluster.registry") == "composition"
    assert layer_of("fmcluster.platforms.storage") == "spec"  # the storage contract
    assert layer_of("fmcluster.platforms.storage.forms") == layer_of("fmcluster.platforms.storage.services") == "spec"
    assert layer_of("fmcluster.platforms.storage.somestore") == "kinds"  # a store's declaration
    assert layer_of("fmcluster.platforms.storage.somestore.construct") == "orchestration"
    assert layer_of("fmcluster.platforms.storage.somestore.settings") == "spec"
    assert layer_of("fmcluster.platforms.storage.instance_nvme.tier") == "spec"  # read by the spec and the planner
    assert layer_of("fmcluster.platforms.storage.somestore.preflight") == "aws"
    assert layer_of("fmcluster.platforms.storage.somestore.node.tool") == "node"


def test_the_spec_knows_no_kind_and_no_registry():
    """spec/ defines the spec; the composition root hands it the kinds."""
    typed = graph(type_checking=True)
    found = sorted(f"{m} imports {i}" for m, deps in typed.items() if m.startswith("fmcluster.spec")
                   for i in deps if layer_of(i) not in ("spec", "runtime", "catalog") or i.startswith("fmcluster.orchestrators"))
    assert found == []


# Node-side scripts run by path with another interpreter, and the package it brings: gpu_bench.py runs under the
# image's PyTorch Python (deep level), importing torch only there.
OTHER_INTERPRETER = {"fmcluster.runtime.gpu_bench": "torch"}


def node_side_modules() -> Dict[str, Path]:
    return {m: p for m, p in modules().items() if layer_of(m) in ("runtime", "node")}


def test_node_side_code_imports_only_the_standard_library_and_the_runtime_in_python_39_syntax():
    """Nodes run it with their own python3 (3.9+) and no packages installed: fmcluster/runtime and every node folder."""
    stdlib = set(sys.stdlib_module_names)
    wrong = []
    for module, path in sorted(node_side_modules().items()):
        tree = ast.parse(path.read_text(), str(path), feature_version=(3, 9))
        for node in _imports(tree, type_checking=True):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if node.level if isinstance(node, ast.ImportFrom) else False:
                    continue  # relative: inside the package, judged by the layer test
                if name.split(".")[0] not in stdlib and name != "fmcluster.runtime" \
                        and not name.startswith("fmcluster.runtime.") and OTHER_INTERPRETER.get(module) != name:
                    wrong.append(f"{module} imports {name}")
    assert wrong == []


def test_node_folders_are_found_and_in_the_node_layer():
    """Guard the guard: the node folders' Python is checked as node-side code."""
    found = [m for m in node_side_modules() if layer_of(m) == "node"]
    assert found, "no Python in any <platforms|orchestrators>/<name>/node folder"
    assert layer_of("fmcluster.platforms.somewhere.node.tool") == "node"
    assert layer_of("fmcluster.orchestrators.somekind.node.tool") == "node"
    assert layer_of("fmcluster.orchestrators.somekind.node_script") == "orchestration"
    assert "fmcluster.runtime.node_setup.cli" in node_side_modules()


def test_platforms_import_nothing_of_the_orchestrators():
    """Platforms are what kinds compose: they take plain props (a spec, a node builder, subnets), never a kind's module
    or the context a kind is bound with (fmcluster.orchestrators.context), so a second kind reuses them as they are."""
    typed = graph(type_checking=True)
    found = sorted(f"{m} imports {i}" for m, deps in typed.items() if m.startswith("fmcluster.platforms")
                   for i in deps if i.startswith("fmcluster.orchestrators"))
    assert found == []

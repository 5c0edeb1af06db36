"""The runtime checks are laid out by layer: checks/<layer>.py holds exactly the checks of that layer (deep ones
included), and a store's own checks sit in its node folder's checks.py (storage layer), found by layout; check
modules depend on the probes (fmcluster/runtime/probes), not on each other, and the probes never depend on the
checks. Read with ast, so the rule holds for imports anywhere in a module, not only for what happens to be imported
when the tests run."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

from fmcluster.runtime.checks import LAYERS, all_checks
from fmcluster.runtime.profile import LEVELS

from .conftest import REPO

RUNTIME = REPO / "fmcluster" / "runtime"
CHECKS = RUNTIME / "checks"
PROBES = RUNTIME / "probes"
STORE_CHECKS = sorted((REPO / "fmcluster" / "platforms" / "storage").glob("*/node/checks.py"))
CHECKS_PKG = "fmcluster.runtime.checks"
REGISTRY_PKG = CHECKS_PKG + ".registry"  # Check, Result, @check: what every check imports


def _package(path: Path) -> str:
    """Dotted package a module's relative imports resolve against."""
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1])


def _imports(path: Path) -> Iterator[Tuple[int, str, List[str]]]:
    """(line, absolute module, imported names) for every import statement in a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg = _package(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module, [a.name for a in node.names]


def _check_modules_imported_names(module: str, names: List[str]) -> List[str]:
    """The layer (check) modules one import statement brings in."""
    if module == REGISTRY_PKG:
        return []
    if module.startswith(CHECKS_PKG + "."):
        return [module]
    if module == CHECKS_PKG:
        return [f"{CHECKS_PKG}.{n}" for n in names if n in LAYERS]
    return []


def _check_modules_imported(path: Path) -> List[str]:
    """The layer (check) modules a module imports, as 'line: module'."""
    return [f"{line}: {m}" for line, module, names in _imports(path) for m in _check_modules_imported_names(module, names)]


def test_layers_are_the_nine_in_order():
    assert LAYERS == ("hardware", "accelerator", "communication", "framework", "distributed", "storage", "containers",
                      "orchestrator", "exporters")


def test_every_layer_has_its_module_and_checks_holds_nothing_else():
    modules = {p.stem for p in CHECKS.glob("*.py")} - {"__init__", "registry"}
    assert modules == set(LAYERS)
    assert not [p for p in CHECKS.iterdir() if p.is_dir() and p.name != "__pycache__"]


def _store_checks_module(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def test_every_check_lives_in_the_module_of_its_layer():
    checks = all_checks()
    stores = {_store_checks_module(p) for p in STORE_CHECKS}
    misplaced = [(c.id, c.layer, c.fn.__module__) for c in checks if c.fn.__module__ != f"{CHECKS_PKG}.{c.layer}"
                 and not (c.layer == "storage" and c.fn.__module__ in stores)]
    assert not misplaced
    assert {c.layer for c in checks} == set(LAYERS), "a layer without checks"
    deep = {c.id: c.fn.__module__ for c in checks if c.level == "deep"}
    assert deep == {"deep.dcgm_diag": f"{CHECKS_PKG}.accelerator", "deep.gemm": f"{CHECKS_PKG}.accelerator",
                    "deep.hbm": f"{CHECKS_PKG}.accelerator", "deep.efa_loopback": f"{CHECKS_PKG}.communication",
                    "deep.nccl_allreduce": f"{CHECKS_PKG}.distributed"}
    assert next(c for c in checks if c.id == "containers.data_root").layer == "containers"


def test_all_checks_are_ordered_by_layer_then_level():
    keys = [(LAYERS.index(c.layer), LEVELS.index(c.level)) for c in all_checks()]
    assert keys == sorted(keys)


def test_check_ids_are_declared_once():
    ids: List[str] = []
    for path in sorted(CHECKS.glob("*.py")) + STORE_CHECKS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check" and node.args:
                arg = node.args[0]
                assert isinstance(arg, ast.Constant), f"{path.name}:{node.lineno}: check id must be a literal"
                ids.append(arg.value)
    assert len(ids) == len(set(ids)) == len(all_checks())


def test_each_stores_checks_are_found_by_layout_and_registered_in_the_storage_layer():
    assert STORE_CHECKS, "no store ships node checks"
    by_module = {c.fn.__module__: c for c in all_checks()}
    for path in STORE_CHECKS:
        assert _store_checks_module(path) in by_module, f"{path}: not imported by the validator"
    assert {by_module[_store_checks_module(p)].layer for p in STORE_CHECKS} == {"storage"}


def test_check_modules_depend_on_probes_not_on_each_other():
    """A helper two layers need is a probe (probes/), not a function imported from another layer's module."""
    wrong = {p.relative_to(REPO).as_posix(): _check_modules_imported(p)
             for p in sorted(CHECKS.glob("*.py")) + STORE_CHECKS if p.name != "__init__.py"}
    assert not {k: v for k, v in wrong.items() if v}


def test_the_checks_package_imports_no_layer_module_at_import_time():
    """checks/__init__ imports the layer modules inside all_checks() only."""
    init = CHECKS / "__init__.py"
    top_level = {n.lineno for n in ast.parse(init.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))}
    for line, module, names in _imports(init):
        if line in top_level:
            assert not _check_modules_imported_names(module, names), f"__init__.py:{line} imports a layer module"


def test_probes_never_import_the_checks():
    """Probes sit below the checks: they take the context from fmcluster.runtime.context and the node from
    fmcluster.runtime.node, so the two packages cannot form a cycle whichever a process imports first."""
    wrong = {p.name: [m for _, m, _ in _imports(p) if m == CHECKS_PKG or m.startswith(CHECKS_PKG + ".")]
             for p in sorted(PROBES.glob("*.py"))}
    assert not {k: v for k, v in wrong.items() if v}
    below = [RUNTIME / "node.py", RUNTIME / "context.py", RUNTIME / "profile.py"]
    for path in below:
        assert not [m for _, m, _ in _imports(path) if "probes" in m or "checks" in m], path.name


def test_runtime_checks_and_probes_are_standard_library_only_python_39():
    stdlib = set(sys.stdlib_module_names)
    for path in sorted(list(CHECKS.glob("*.py")) + list(PROBES.glob("*.py")) + [RUNTIME / "node.py", RUNTIME / "context.py"]):
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))
        for line, module, _ in _imports(path):
            top = module.split(".")[0]
            assert top in stdlib or module.startswith("fmcluster.runtime"), f"{path.name}:{line} imports {module}"


def test_importing_the_checks_loads_no_probe_until_the_checks_are_asked_for():
    """No module cycle is possible (tests/test_layers.py proves it for every module); what is left to show is that
    the package loads lazily: importing the checks loads no layer's probes."""
    res = subprocess.run([sys.executable, "-c", "import sys, fmcluster.runtime.checks as c\n"
                          "print(sorted(m for m in sys.modules if m.startswith('fmcluster.runtime.probes.')))"],
                         capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr

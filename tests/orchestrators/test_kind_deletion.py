"""A kind is one folder and its lines in the registry: deleting them leaves a package that still works.

For each built-in kind: nothing outside its folder (package or tests, its own tests and examples aside) names it, and
a copy of the package without its folder and its registry lines imports every module and validates every other kind's
example, while the deleted kind's example is refused as an unknown orchestrator type.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import ROOT

from fmcluster import registry

KINDS = [k.name for k in registry.BUILT_IN]


def folder(kind: str) -> str:
    return kind.replace("-", "_")


def example_kind(path: Path) -> str:
    return (yaml.safe_load(path.read_text()).get("orchestrator") or {}).get("type", registry.BUILT_IN[0].name)


def names_the_kind(text: str, kind: str) -> bool:
    module = re.escape(folder(kind))
    return re.search(rf"fmcluster\.orchestrators\.{module}\b|from fmcluster\.orchestrators import [^\n]*\b{module}\b",
                     text) is not None


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_outside_a_kinds_folder_imports_it(kind):
    own = {ROOT / "fmcluster" / "orchestrators" / folder(kind), ROOT / "tests" / "orchestrators" / folder(kind)}
    sources = [*(ROOT / "fmcluster").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "scripts").rglob("*.py"),
               *(ROOT / "bench").rglob("*.py"), ROOT / "app.py"]
    outside = [str(p.relative_to(ROOT)) for p in sources
               if not any(d in p.parents for d in own) and p != ROOT / "fmcluster" / "registry.py"
               and p != Path(__file__) and names_the_kind(p.read_text(), kind)]
    assert outside == []


DELETED = """
import importlib, json, pkgutil, sys

# one process for every deleted kind: aws_cdk (seconds of jsii start-up) loads once, fmcluster once per copy
results = {}
for root, kind in zip(sys.argv[1::2], sys.argv[2::2]):
    for name in [m for m in sys.modules if m == "fmcluster" or m.startswith("fmcluster.")]:
        del sys.modules[name]
    sys.path.insert(0, root)
    importlib.invalidate_caches()
    try:
        import fmcluster
        assert fmcluster.__file__.startswith(root), fmcluster.__file__
        for m in pkgutil.walk_packages(fmcluster.__path__, "fmcluster."):
            if not m.name.endswith("__main__"):
                importlib.import_module(m.name)
        from fmcluster import registry
        from fmcluster.spec import SpecError
        assert kind not in registry.names(), registry.names()
        for path, example_kind in json.loads(open(root + "/examples.json").read()):
            try:
                registry.load_spec(path)
            except SpecError as e:
                assert example_kind == kind and f"orchestrator.type: {kind!r} is not allowed" in e.problems[0], (
                    path, e.problems)
            else:
                assert example_kind != kind, path
        results[kind] = "ok"
    except BaseException as e:  # noqa: BLE001 - every kind's outcome is reported
        results[kind] = f"{type(e).__name__}: {e}"
    finally:
        sys.path.remove(root)
print(json.dumps(results))
"""


def without_kind(kind: str, root: Path) -> None:
    """A copy of the package under root, without the kind's folder and its two registry lines."""
    package = root / "fmcluster"
    shutil.copytree(ROOT / "fmcluster", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(package / "orchestrators" / folder(kind))
    registry_py = package / "registry.py"
    lines = registry_py.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not re.fullmatch(rf"\s*{folder(kind)}(\.KIND)?,\s*", line)]
    assert len(lines) - len(kept) == 2, "a kind has one line in the registry's import and one in BUILT_IN"
    registry_py.write_text("".join(kept))
    examples = sorted((ROOT / "examples").glob("*.yaml"))
    (root / "examples.json").write_text(json.dumps([(str(p), example_kind(p)) for p in examples]))


def test_a_package_without_any_one_kind_imports_and_validates_the_other_kinds_examples(tmp_path):
    deleted = KINDS[1:]  # the first kind is the default a spec without orchestrator gets
    args = []
    for kind in deleted:
        without_kind(kind, tmp_path / folder(kind))
        args += [str(tmp_path / folder(kind)), kind]
    r = subprocess.run([sys.executable, "-c", DELETED, *args], cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {kind: "ok" for kind in deleted}

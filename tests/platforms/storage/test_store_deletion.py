"""A store is one folder and its lines in the registry: deleting them leaves a package that still works.

For Mountpoint for Amazon S3 (the store added after the seam): nothing outside its folder imports it (package,
scripts, bench or tests, its own tests aside), and a copy of the package without its folder and its two registry lines
imports every module, validates every example (those that mount it are refused as naming an unknown storage key), and
synthesizes an example that mounted it, with the store's section taken out, into stacks that hold nothing of it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import ROOT

STORE = "mountpoint_s3"
FOLDER = ROOT / "fmcluster" / "platforms" / "storage" / STORE
OWN_TESTS = ROOT / "tests" / "platforms" / "storage" / STORE
EXAMPLE = "eks-p6-b200-capacity-block"  # mounts it beside FSx for Lustre


def imports_the_store(text: str) -> bool:
    return re.search(rf"fmcluster\.platforms\.storage\.{STORE}\b|from fmcluster\.platforms\.storage import "
                     rf"[^\n]*\b{STORE}\b|^\s+{STORE},$", text, re.M) is not None


def test_nothing_outside_the_stores_folder_imports_it():
    sources = [*(ROOT / "fmcluster").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "scripts").rglob("*.py"),
               *(ROOT / "bench").rglob("*.py"), ROOT / "app.py"]
    outside = [str(p.relative_to(ROOT)) for p in sources
               if FOLDER not in p.parents and OWN_TESTS not in p.parents and p != ROOT / "fmcluster" / "registry.py"
               and p != Path(__file__) and imports_the_store(p.read_text())]
    assert outside == []


DELETED = """
import importlib, json, pkgutil, sys

import fmcluster
assert fmcluster.__file__.startswith(sys.argv[1]), fmcluster.__file__
for m in pkgutil.walk_packages(fmcluster.__path__, "fmcluster."):
    if not m.name.endswith("__main__"):
        importlib.import_module(m.name)
from fmcluster import registry
from fmcluster.app import synthesize
from fmcluster.spec import SpecError

assert [s.name for s in registry.stores()] == ["fsx-lustre"], registry.stores()
refused = []
for path, mounts_it in json.loads(open("examples.json").read()):
    try:
        registry.load_spec(path)
    except SpecError as e:
        assert mounts_it and any(p.startswith("storage.mountpoint_s3: unknown key") for p in e.problems), e.problems
        refused.append(path)
    else:
        assert not mounts_it, path
templates = synthesize(sys.argv[2], nag=False)
print(json.dumps({"refused": len(refused), "templates": templates}))
"""


def without_store(root: Path) -> None:
    """A copy of the package under root, without the store's folder and its two registry lines."""
    package = root / "fmcluster"
    shutil.copytree(ROOT / "fmcluster", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(package / "platforms" / "storage" / STORE)
    registry_py = package / "registry.py"
    lines = registry_py.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not re.fullmatch(rf"\s*{STORE}(\.STORE)?,\s*", line)]
    assert len(lines) - len(kept) == 2, "a store has one line in the registry's import and one in STORES"
    registry_py.write_text("".join(kept))
    examples = sorted((ROOT / "examples").glob("*.yaml"))
    (root / "examples.json").write_text(json.dumps(
        [(str(p), STORE in (yaml.safe_load(p.read_text()).get("storage") or {})) for p in examples]))


def test_a_package_without_the_store_imports_validates_and_synthesizes_the_rest(tmp_path):
    without_store(tmp_path)
    spec = yaml.safe_load((ROOT / "examples" / f"{EXAMPLE}.yaml").read_text())
    del spec["storage"][STORE]
    (tmp_path / "example.yaml").write_text(yaml.safe_dump(spec))
    r = subprocess.run([sys.executable, "-c", DELETED, str(tmp_path), str(tmp_path / "example.yaml")], cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path),
                            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["refused"] == 6, ("existing-vpc, pcs-p6-b200-odcr, eks-p6-b200-capacity-block, "
                                    "parallelcluster-p5en-capacity-block, hyperpod-slurm-p5 and "
                                    "hyperpod-eks-p5en-serving mount it")
    templates = result["templates"]
    assert "FileSystem" in templates["eks-b200-storage"]["Resources"], "FSx for Lustre is still built"
    assert not re.search(r"Mountpoint|mount-s3|s3\.csi\.aws\.com", json.dumps(templates))

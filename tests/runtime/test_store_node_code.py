"""A store's node code (platforms/storage/<store>/node/) is found by layout: the validator imports each store's
checks.py, and the mount helper runs under the name launch templates carry, both from the repository and from the
runtime archive unpacked as a node unpacks it (pkg/fmcluster/runtime, namespace packages below it)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List

import pytest

from fmcluster.constructs import node_bootstrap
from fmcluster.runtime import stores

from .conftest import SYSTEM_PATH

ON_NODE = "fmcluster.runtime.platforms.storage"
# runpy from the unpacked archive with the standard library only (-I -S: no site-packages, no PYTHONPATH)
RUN = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
       "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


@pytest.fixture(scope="module")
def pkg(tmp_path_factory) -> Path:
    pkg = tmp_path_factory.mktemp("node") / "pkg"
    with zipfile.ZipFile(io.BytesIO(node_bootstrap.runtime_zip())) as archive:
        archive.extractall(pkg / "fmcluster" / "runtime")
    return pkg


def on_node(pkg: Path, module: str, *args: str, env: dict = None, cwd: Path = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-S", "-c", RUN, str(pkg), module, *args], capture_output=True,
                          text=True, timeout=60, env=env, cwd=cwd)


def test_the_stores_node_folders_import_below_the_runtime_on_a_node_and_at_their_path_in_the_repository(pkg):
    here = [name for name, _ in stores.node_packages()]
    assert here and all(n.startswith("fmcluster.platforms.storage.") and n.endswith(".node") for n in here)
    shipped = [name for name, _ in stores.node_packages(pkg / "fmcluster" / "runtime")]
    assert shipped == [n.replace("fmcluster.platforms.storage.", f"{ON_NODE}.") for n in here]


def test_a_tool_run_by_an_earlier_name_must_be_one_stores(tmp_path):
    runtime = tmp_path / "fmcluster" / "runtime"
    for store in ("a", "b"):
        (runtime / "platforms" / "storage" / store / "node").mkdir(parents=True)
        (runtime / "platforms" / "storage" / store / "node" / "both.py").write_text("")
    (runtime / "platforms" / "storage" / "a" / "node" / "tool.py").write_text("")
    assert stores.node_module_name("tool", runtime) == f"{ON_NODE}.a.node.tool"
    for leaf in ("both", "none"):
        with pytest.raises(LookupError):
            stores.node_module_name(leaf, runtime)


def _storage(report: dict) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("duration_s", "duration")} for c in report["checks"]
            if c["id"].startswith("storage.")]


def test_the_validator_from_the_unpacked_archive_says_what_it_says_from_the_repository(pkg, p5):
    """Same check ids, titles, statuses, remedies: the stores' checks are found below the unpacked runtime."""
    p5.remove("/sys/module/kefalnd")  # a failing store check, so its remedy is compared too
    profile = p5.profile(mounts=[{"path": "/fsx", "fstype": "lustre", "efa": True}])
    argv = p5._argv(("--level", "standard"), profile)
    env = {"PATH": f"{p5.bin}:{SYSTEM_PATH}", "HOME": str(p5.base)}
    node = on_node(pkg, "fmcluster.runtime.validate", *argv, env=env, cwd=p5.base)
    here = p5.run("--level", "standard", profile=profile)
    assert node.returncode == here.rc == 1, node.stderr
    shipped = _storage(json.loads(node.stdout))
    assert shipped == _storage(here.report)
    assert [c["id"] for c in shipped] == ["storage.mounts", "storage.instance_store", "storage.lustre_answers",
                                          "storage.lustre_imports", "storage.s3_answers"]
    imports = next(c for c in shipped if c["id"] == "storage.lustre_imports")
    assert imports["status"] == "fail" and "python3 -m fmcluster.runtime.lustre mount --efa" in imports["remedy"]


def test_a_mount_no_stores_node_code_owns_is_judged_alike_with_the_plain_remedy(p5):
    from fmcluster.runtime.checks.storage import MOUNT_REMEDY

    res = p5.run("--level", "fast", profile=p5.profile(mounts=[{"path": "/fsx", "fstype": "lustre"},
                                                               {"path": "/home", "fstype": "nfs4"}]))
    check = res.check("storage.mounts")
    assert check["status"] == "fail" and check["observed"].startswith("/home not mounted")
    assert check["remedy"] == MOUNT_REMEDY


def test_a_profile_mount_without_fstype_is_the_store_that_takes_untyped_mounts(p5):
    res = p5.run("--level", "standard", profile=p5.profile(mounts=[{"path": "/fsx"}]))
    assert res.status("storage.mounts") == "pass" and res.status("storage.lustre_answers") == "pass"
    assert res.check("storage.mounts")["expected"] == "/fsx (lustre)"


@pytest.mark.parametrize("module", ["fmcluster.runtime.lustre", f"{ON_NODE}.fsx_lustre.node.lustre"])
def test_the_mount_helper_answers_from_the_archive_under_the_launch_templates_name_and_its_own(pkg, module):
    r = on_node(pkg, module, "verify", "--mount-point", "/nowhere", "--root", str(pkg), "--format", "json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["mount_point"] == "/nowhere"
    usage = on_node(pkg, module, "--help")
    assert usage.returncode == 0 and "usage: python3 -m fmcluster.runtime.lustre " in usage.stdout  # nodes' name for it


def test_a_stores_lifecycle_entry_is_read_on_the_node_under_the_key_its_store_declares():
    from fmcluster import registry
    from fmcluster.runtime.contract import LIFECYCLE_PARAMETERS_KEYS, with_store_entries

    declared = [s.lifecycle_key for s in registry.stores() if s.lifecycle_key is not None]
    assert stores.lifecycle_keys() == declared
    keys = with_store_entries(LIFECYCLE_PARAMETERS_KEYS, declared)
    assert keys.index("worker_groups") < keys.index(declared[0]) == keys.index("mounts") - len(declared)


def test_a_stores_lifecycle_step_is_named_by_the_key_its_node_lifecycle_module_reads():
    for name, folder in stores.node_packages():
        script = folder / "lifecycle.sh"
        if script.is_file():
            module = __import__(f"{name}.lifecycle", fromlist=["KEY"])
            assert f"STORE_ENTRIES+=({module.KEY})" in script.read_text().splitlines(), script
            assert f"entry_step_{module.KEY}() {{" in script.read_text(), script
    assert any((folder / "lifecycle.sh").is_file() for _, folder in stores.node_packages())

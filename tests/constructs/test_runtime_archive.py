"""The one runtime archive every node fetches: fmcluster/runtime at its root and each platform's and kind's node folder
at its path in the package, found by layout, byte-identical for the same files."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fmcluster.constructs import node_bootstrap
from fmcluster.constructs.runtime_archive import (
    PACKAGE_DIR,
    archive_members,
    archive_path,
    node_folders,
    runtime_archive,
)


def names(data: bytes) -> list:
    return zipfile.ZipFile(io.BytesIO(data)).namelist()


def package(tmp_path: Path, files: dict) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_every_node_folder_of_the_package_rides_in_the_archive_at_its_path_in_the_package():
    folders = node_folders()
    on_disk = sorted(d for owner in ("platforms", "orchestrators", "platforms/storage")
                     for d in (PACKAGE_DIR / owner).glob("*/node"))
    assert folders == on_disk and folders, "found by layout: every <owner>/<name>/node folder, none named"
    archived = set(names(node_bootstrap.runtime_zip()))
    for folder in folders:
        for f in folder.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts:
                assert f"{f.relative_to(PACKAGE_DIR).as_posix()}" in archived
    assert {"node_bootstrap.sh", "validate.py", "node_setup/__main__.py"} <= archived  # the runtime at the root


def test_a_node_folder_is_found_by_its_place_and_a_folder_elsewhere_is_not(tmp_path):
    root = package(tmp_path, {"runtime/validate.py": "", "platforms/toy/node/setup.sh": "#!/bin/bash\n",
                              "orchestrators/kindling/node/run.sh": "#!/bin/bash\n",
                              "platforms/toy/other/not-a-node-file.sh": "", "constructs/node/x.sh": ""})
    found = node_folders(root)
    assert [archive_path(f) for f in found] == ["orchestrators/kindling/node", "platforms/toy/node"]
    assert sorted(archive_members(root / "runtime", with_folders=found)) == [
        "orchestrators/kindling/node/run.sh", "platforms/toy/node/setup.sh", "validate.py"]


def test_a_stores_node_folder_rides_at_its_path_below_the_storage_platform(tmp_path):
    root = package(tmp_path, {"runtime/validate.py": "", "platforms/storage/toy/node/checks.py": "",
                              "platforms/storage/toy/settings.py": "", "platforms/storage/__init__.py": ""})
    found = node_folders(root)
    assert [archive_path(f) for f in found] == ["platforms/storage/toy/node"]
    assert sorted(archive_members(root / "runtime", with_folders=found)) == [
        "platforms/storage/toy/node/checks.py", "validate.py"]


def test_the_same_files_give_the_same_bytes_and_a_changed_file_another_archive(tmp_path):
    root = package(tmp_path, {"runtime/validate.py": "v1", "platforms/toy/node/setup.sh": "a"})
    first = runtime_archive(root / "runtime", with_folders=node_folders(root))
    (root / "platforms/toy/node/__pycache__").mkdir()
    (root / "platforms/toy/node/__pycache__/x.pyc").write_bytes(b"cache")
    assert runtime_archive(root / "runtime", with_folders=node_folders(root)) == first, "caches are left out"
    (root / "platforms/toy/node/setup.sh").write_text("b")
    assert runtime_archive(root / "runtime", with_folders=node_folders(root)) != first


def test_a_runtime_that_holds_a_node_folders_place_is_refused(tmp_path):
    root = package(tmp_path, {"runtime/platforms/x.py": "", "platforms/toy/node/setup.sh": ""})
    with pytest.raises(ValueError, match="may not hold platforms/"):
        runtime_archive(root / "runtime", with_folders=node_folders(root))
    with pytest.raises(ValueError, match="a node folder is"):
        archive_path(root / "platforms" / "toy")


def test_the_commands_nodes_run_work_from_the_unpacked_archive_with_the_standard_library_only(tmp_path):
    """Unpacked as user data and the HyperPod entry unpack it (pkg/fmcluster/runtime), the node-setup tool answers
    under its name and under the earlier name EKS launch templates run; python3 -I -S: no site-packages, no
    environment, nothing but the standard library and the archive."""
    pkg = tmp_path / "pkg"
    with zipfile.ZipFile(io.BytesIO(node_bootstrap.runtime_zip())) as archive:
        archive.extractall(pkg / "fmcluster" / "runtime")
    (pkg / "fmcluster" / "__init__.py").touch()
    for module in ("fmcluster.runtime.node_setup", "fmcluster.runtime.lifecycle.node"):
        units = tmp_path / module
        r = subprocess.run([sys.executable, "-I", "-S", "-c", "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
                            "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)",
                            str(pkg), module, "efa-units", "--unit-dir", str(units)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert sorted(p.name for p in units.iterdir()) == r.stdout.split() and r.stdout.split()
    assert (pkg / "fmcluster/runtime/platforms/hyperpod/node/on_init_complete.sh").is_file()


def test_hyperpod_entries_of_earlier_releases_still_reach_the_lifecycle_scripts(tmp_path):
    """Entries are rewritten after the pointers: for the moments between, an earlier entry runs this runtime's
    lifecycle/<script>, which must reach the script in the hyperpod platform's node folder."""
    runtime = tmp_path / "pkg" / "fmcluster" / "runtime"
    with zipfile.ZipFile(io.BytesIO(node_bootstrap.runtime_zip())) as archive:
        archive.extractall(runtime)
    for script in ("on_init_complete.sh", "on_create_eks.sh"):
        target = runtime / "lifecycle" / ".." / "platforms" / "hyperpod" / "node" / script
        assert f'/../platforms/hyperpod/node/{script}" "$@"' in (runtime / "lifecycle" / script).read_text()
        assert target.resolve().is_file()
    # the real script answers (no --group: its usage line), reached through the earlier path
    r = subprocess.run(["bash", str(runtime / "lifecycle" / "on_create_eks.sh")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("usage: on_create_eks.sh --group"), r.stderr

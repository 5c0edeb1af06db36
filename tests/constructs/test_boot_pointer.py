"""The boot pointer as a node reads it: the user data lines run against a fake `aws s3 cp` serving a local bucket.
A node gets the runtime and profile its pointer names, checked by sha256; a pointer it cannot read or trust fails
the boot, published where the validator's verdict goes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any, Dict

import pytest
from helpers.fake_s3 import runtime_bucket

from fmcluster.constructs import boot_pointer

PROFILE = {"instance_type": "p5.48xlarge", "group": "h100", "level": "standard", "policy": "drain"}


@pytest.fixture
def node(tmp_path: Path):
    """A bucket directory, a node root and a PATH whose `aws` copies s3://bucket/KEY from the bucket directory."""
    return runtime_bucket(tmp_path, "bucket", {"validate.py": "print('validator')\n", "checks/gpu.py": "GPU = True\n"})


def publish(node: Dict[str, Any], **overrides: Any) -> None:
    """h100's pointer, with `overrides` written into the document."""
    document = boot_pointer.pointer_document(group="h100", runtime_key=f"runtime/{node['digest']}.zip",
                                             sha256=node["digest"], level="fast", policy="drain",
                                             profile_json=json.dumps(PROFILE))
    document.update(overrides)
    (node["bucket"] / boot_pointer.group_key("h100")).write_text(json.dumps(document))


def boot(node: Dict[str, Any], group: str = "h100") -> subprocess.CompletedProcess:
    script = "set -euo pipefail\n" + boot_pointer.read_pointer_shell(
        bucket="bucket", region="us-east-1", key=boot_pointer.group_key(group), group=group) + "echo booted\n"
    env = dict(os.environ, PATH=f"{node['bin']}:{os.environ['PATH']}", FMCLUSTER_ROOT=str(node["root"]),
               FMCLUSTER_RETRY_DELAY="0")
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)


def verdict(node: Dict[str, Any]) -> Dict[str, Any]:
    return json.loads((node["root"] / "var/lib/fmcluster/validation.json").read_text())


def log(node: Dict[str, Any]) -> str:
    return (node["root"] / "var/log/fmcluster/user-data.log").read_text()


def test_a_node_unpacks_the_runtime_and_writes_the_profile_its_pointer_names(node):
    publish(node)
    result = boot(node)
    assert result.returncode == 0, log(node)
    assert "booted" in log(node)
    pkg = node["root"] / "opt/fmcluster/pkg/fmcluster"
    assert (pkg / "runtime/checks/gpu.py").read_text() == "GPU = True\n" and (pkg / "__init__.py").exists()
    assert json.loads((node["root"] / "etc/fmcluster/profile.json").read_text()) == PROFILE
    env = (node["root"] / "etc/fmcluster/boot.env").read_text()
    assert "FMCLUSTER_LEVEL=fast\n" in env and "FMCLUSTER_POLICY=drain\n" in env
    assert f"FMCLUSTER_RUNTIME_SHA256={node['digest']}\n" in env
    assert not (node["root"] / "var/lib/fmcluster/validation.json").exists()


def test_a_missing_pointer_fails_the_boot_and_says_so(node):
    result = boot(node)
    assert result.returncode == 1
    assert verdict(node)["verdict"] == "fail" and verdict(node)["failing"] == ["boot.pointer"]
    assert "cannot read s3://bucket/boot/groups/h100.json" in verdict(node)["error"]
    assert "boot failed (boot.pointer)" in (node["tmp"] / "journal.log").read_text()
    assert len((node["tmp"] / "aws.log").read_text().splitlines()) == 6, "bounded attempts, then the failure"
    assert "booted" not in log(node)


def test_a_runtime_that_does_not_match_the_pointers_sha256_is_never_unpacked(node):
    publish(node)
    (node["bucket"] / f"runtime/{node['digest']}.zip").write_bytes(b"PK tampered or truncated")
    result = boot(node)
    assert result.returncode == 1 and verdict(node)["failing"] == ["boot.runtime"]
    assert "does not match its sha256" in verdict(node)["error"]
    assert not (node["root"] / "opt/fmcluster/pkg/fmcluster/runtime").exists()


@pytest.mark.parametrize("overrides, why", [
    ({"group": "b200"}, "names group 'b200'"),
    ({"schema": 2}, "schema 2"),
    ({"level": "thorough"}, "level 'thorough'"),
    ({"runtime": {"key": "runtime/../../etc/passwd", "sha256": "0" * 64}}, "runtime is not"),
])
def test_a_pointer_the_node_cannot_trust_fails_the_boot(node, overrides, why):
    publish(node, **overrides)
    result = boot(node)
    assert result.returncode == 1 and verdict(node)["failing"] == ["boot.pointer"]
    assert why in log(node)


def test_a_pointer_that_is_not_json_fails_the_boot(node):
    (node["bucket"] / boot_pointer.group_key("h100")).write_text("<Error>AccessDenied</Error>")
    assert boot(node).returncode == 1 and verdict(node)["failing"] == ["boot.pointer"]


def test_the_reader_is_shellcheck_clean(tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    script = tmp_path / "user-data.sh"
    script.write_text("#!/bin/bash\nset -euo pipefail\n" + boot_pointer.read_pointer_shell(
        bucket="bucket", region="us-east-1", key="boot/groups/h100.json", group="h100"))
    result = subprocess.run([shellcheck, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout


def test_the_archive_a_pointer_names_is_the_runtime_and_nothing_else(node, tmp_path):
    with zipfile.ZipFile(node["bucket"] / f"runtime/{node['digest']}.zip") as archive:
        assert sorted(archive.namelist()) == ["checks/gpu.py", "validate.py"]

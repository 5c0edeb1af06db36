"""The HyperPod lifecycle entry as a node runs it: against a fake `aws s3 cp` serving a local bucket, it reads its
group's pointer, fetches the runtime the pointer names, checks its sha256, and runs the lifecycle script in it with
the parameters and profile laid out where that script looks (beside its pkg/). A pointer it cannot read or trust, or a
runtime that does not match, fails it loudly before anything runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict

import pytest
from helpers.fake_s3 import runtime_bucket

from fmcluster.constructs.runtime_archive import archive_path
from fmcluster.platforms.hyperpod import lifecycle_entry

NODE_FOLDER = archive_path(lifecycle_entry.NODE_DIR)  # platforms/hyperpod/node, below the runtime's root

PARAMS = {"version": 1, "workload_manager": "slurm", "cluster_name": "demo", "controller_group": "controller"}
PROFILE = {"instance_type": "ml.p5.48xlarge", "group": "gpu-a", "level": "standard", "policy": "drain"}
# The platform's lifecycle script, as a stand-in: says what it was given and what lies where common.sh looks (the
# prefix holding pkg/, six levels above pkg/fmcluster/runtime/platforms/hyperpod/node).
FAKE_LIFECYCLE = """#!/bin/bash
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="$(cd "$here/../../../../../.." && pwd)"
echo "ran $(basename "$0") $*"
echo "params $(cat "$prefix/fmcluster_parameters.json" | tr -d ' \\n')"
ls "$prefix/profiles" 2>/dev/null | sed 's/^/profile /'
"""


@pytest.fixture
def node(tmp_path: Path) -> Dict[str, Any]:
    return runtime_bucket(tmp_path, "sagemaker-demo",
                          {f"{NODE_FOLDER}/{script}": FAKE_LIFECYCLE for script in lifecycle_entry.RUNTIME_SCRIPTS.values()})


def publish(node: Dict[str, Any], for_group: str = "gpu-a", profile: Any = PROFILE, **overrides: Any) -> None:
    """`for_group`'s pointer, with `overrides` written into the document."""
    document = lifecycle_entry.pointer_document(
        group=for_group, runtime_key=f"runtime/{node['digest']}.zip", sha256=node["digest"], parameters=PARAMS,
        profile_json=json.dumps(profile) if profile is not None else None)
    document.update(overrides)
    (node["bucket"] / lifecycle_entry.pointer_key(for_group)).write_text(json.dumps(document))


def run_entry(node: Dict[str, Any], group: str = "gpu-a", hook: str = "OnInitComplete") -> subprocess.CompletedProcess:
    entry = node["tmp"] / f"entry.{group}.sh"
    entry.write_text(lifecycle_entry.entry_script(bucket="sagemaker-demo", region="us-east-1", group=group, hook=hook))
    env = dict(os.environ, PATH=f"{node['bin']}:{os.environ['PATH']}", FMCLUSTER_LIFECYCLE_ROOT=str(node["root"]),
               FMCLUSTER_RETRY_DELAY="0")
    return subprocess.run(["bash", str(entry), "--hyperpod-arg"], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("hook, script", list(lifecycle_entry.RUNTIME_SCRIPTS.items()))
def test_the_entry_runs_the_lifecycle_script_of_the_runtime_its_pointer_names(node, hook, script):
    publish(node)
    result = run_entry(node, hook=hook)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"ran {script} --group gpu-a --hyperpod-arg"
    assert lines[1] == "params " + json.dumps(PARAMS).replace(" ", "")
    assert lines[2:] == ["profile gpu-a.json"]
    stage = node["root"] / "var/lib/fmcluster/boot/gpu-a"
    assert json.loads((stage / "profiles/gpu-a.json").read_text()) == PROFILE
    assert (stage / "pkg/fmcluster/__init__.py").exists()


def test_a_group_without_a_profile_gets_the_parameters_only(node):
    publish(node, for_group="controller", profile=None)
    # as deployed: CDK's Source.json_data leaves a null out
    pointer = node["bucket"] / lifecycle_entry.pointer_key("controller")
    document = json.loads(pointer.read_text())
    del document["profile"]
    pointer.write_text(json.dumps(document))
    result = run_entry(node, group="controller")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2:] == []


def test_a_missing_pointer_fails_the_entry_after_bounded_attempts(node):
    result = run_entry(node)
    assert result.returncode == 1
    assert ("fmcluster lifecycle FAILED at step boot: cannot read s3://sagemaker-demo/boot/groups/gpu-a.json"
            in result.stderr)
    assert len((node["tmp"] / "aws.log").read_text().splitlines()) == 6
    assert "lifecycle boot failed" in (node["tmp"] / "journal.log").read_text()
    assert "ran " not in result.stdout


def test_a_runtime_that_does_not_match_the_pointers_sha256_is_never_unpacked_or_run(node):
    publish(node)
    (node["bucket"] / f"runtime/{node['digest']}.zip").write_bytes(b"PK tampered or truncated")
    result = run_entry(node)
    assert result.returncode == 1 and "does not match its sha256 in the pointer" in result.stderr
    assert not (node["root"] / "var/lib/fmcluster/boot/gpu-a/pkg/fmcluster/runtime" / NODE_FOLDER).exists()
    assert "ran " not in result.stdout


@pytest.mark.parametrize("overrides, why", [
    ({"group": "gpu-b"}, "names group 'gpu-b'"),
    ({"schema": 2}, "schema 2"),
    ({"runtime": {"key": "runtime/../../etc/passwd", "sha256": "0" * 64}}, "runtime is not"),
    ({"parameters": None}, "parameters is not an object"),
])
def test_a_pointer_the_entry_cannot_trust_fails_it(node, overrides, why):
    publish(node, **overrides)
    result = run_entry(node)
    assert result.returncode == 1 and why in result.stderr
    assert "FAILED at step boot: s3://sagemaker-demo/boot/groups/gpu-a.json is not a lifecycle pointer" in result.stderr
    assert "ran " not in result.stdout


def test_a_pointer_that_is_not_json_fails_the_entry(node):
    (node["bucket"] / lifecycle_entry.pointer_key("gpu-a")).write_text("<Error>AccessDenied</Error>")
    result = run_entry(node)
    assert result.returncode == 1 and "is not a lifecycle pointer" in result.stderr


def test_the_entry_is_shellcheck_clean(tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    script = tmp_path / "entry.sh"
    script.write_text(lifecycle_entry.entry_script(bucket="b", region="us-east-1", group="gpu-a", hook="OnCreate"))
    result = subprocess.run([shellcheck, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout


def test_the_entry_changes_with_nothing_a_routine_change_touches():
    """Its text is the group's LifeCycleConfig in effect: bucket, region, group and hook only."""
    one = lifecycle_entry.entry_script(bucket="b", region="us-east-1", group="gpu-a", hook="OnCreate")
    assert one == lifecycle_entry.entry_script(bucket="b", region="us-east-1", group="gpu-a", hook="OnCreate")
    assert not any(c in one for c in ("level", "policy", "remote_write"))

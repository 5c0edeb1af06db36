"""scripts/install-tools.sh, which `make setup` runs: on any system it installs what a deploying user needs (graphviz,
with the package manager there is), skips the test-only tools with one line where there is no apt-get, and never
fails setup. Run with a PATH of fakes that log what they are asked, and an `id` that says we are not root."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import ROOT

SCRIPT = ROOT / "scripts" / "install-tools.sh"
BASH = "/bin/bash"


def run(tmp_path: Path, *commands: str):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls"
    (bin_ / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_ / "sudo").write_text(f'#!/bin/sh\necho "sudo $*" >> {log}\n')
    for name in commands:
        (bin_ / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    out = subprocess.run([BASH, str(SCRIPT)], capture_output=True, text=True, timeout=30,
                         env={"PATH": str(bin_)})
    return out.returncode, out.stderr, (log.read_text().splitlines() if log.exists() else [])


@pytest.mark.parametrize("manager, call", [
    ("brew", "brew install graphviz"),
    ("dnf", "sudo dnf install -y -q graphviz"),
    ("yum", "sudo yum install -y -q graphviz"),
    ("zypper", "sudo zypper --non-interactive install graphviz"),
])
def test_without_apt_get_graphviz_is_installed_and_the_test_tools_skipped_with_one_line(tmp_path, manager, call):
    code, err, calls = run(tmp_path, manager)
    assert code == 0 and calls == [call]
    skipped = [line for line in err.splitlines() if "skipping the test-only tools" in line]
    assert skipped == ["install-tools: skipping the test-only tools (prometheus prometheus-alertmanager shellcheck "
                       "chromium): their packages are named for apt-get; install them yourself to run make test "
                       "(CONTRIBUTING.md)"]


def test_with_no_package_manager_setup_goes_on_and_says_what_to_install(tmp_path):
    code, err, calls = run(tmp_path)
    assert code == 0 and calls == []
    assert "install graphviz (its dot command) yourself for fmcluster diagram and plan --html" in err


def test_with_apt_get_everything_is_installed_in_one_call(tmp_path):
    code, _, calls = run(tmp_path, "apt-get")
    assert code == 0 and calls == [
        "sudo apt-get update -qq",
        "sudo apt-get install -y -qq --no-install-recommends graphviz prometheus prometheus-alertmanager shellcheck "
        "chromium"]


def test_a_failing_install_does_not_fail_setup(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "id").write_text("#!/bin/sh\necho 0\n")
    (bin_ / "brew").write_text("#!/bin/sh\nexit 1\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    out = subprocess.run([BASH, str(SCRIPT)], capture_output=True, text=True, timeout=30, env={"PATH": str(bin_)})
    assert out.returncode == 0 and "'brew install graphviz' failed: install graphviz yourself" in out.stderr

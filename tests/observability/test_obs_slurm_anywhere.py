"""Slurm metrics wherever Slurm runs. The collector finds sinfo in Slurm's own prefixes (a
systemd timer's PATH has none of them), installs on any Slurm node, and the PCS login node runs it (PCS's
controller is AWS's)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fmcluster.runtime import observability as rt
from fmcluster.runtime.observability import slurm_textfile

REPO = Path(__file__).resolve().parents[2]
INSTALL = Path(rt.__file__).parent / "install.sh"
SINFO_OUT = "gpu-1|idle\\ngpu-2|down*\\n"


def fake_sinfo(root: Path, where: str) -> Path:
    path = root / where.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nprintf '{SINFO_OUT}'\n")  # a shell builtin: the tests empty PATH
    path.chmod(0o755)
    return path


@pytest.fixture
def no_path_sinfo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # as under systemd: no Slurm prefix on PATH


@pytest.mark.usefixtures("no_path_sinfo")
@pytest.mark.parametrize("installed, found", [
    (["/opt/slurm/bin/sinfo"], "/opt/slurm/bin/sinfo"),  # HyperPod, ParallelCluster
    (["/opt/aws/pcs/scheduler/slurm-24.11/bin/sinfo", "/opt/aws/pcs/scheduler/slurm-25.05/bin/sinfo"],
     "/opt/aws/pcs/scheduler/slurm-25.05/bin/sinfo"),  # AWS PCS: the newest installed version
    ([], None),
])
def test_sinfo_is_found_in_slurms_own_prefixes(tmp_path: Path, installed, found) -> None:
    root = tmp_path / "root"
    for where in installed:
        fake_sinfo(root, where)
    got = slurm_textfile.find_sinfo(str(root))
    assert got == (str(root) + found if found else None)


@pytest.mark.usefixtures("no_path_sinfo")
def test_the_collector_reports_without_sinfo_on_path(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fake_sinfo(root, "/opt/slurm/bin/sinfo")
    out = tmp_path / "slurm.prom"
    assert slurm_textfile.main(["--root", str(root), "--out", str(out)]) == 0
    text = out.read_text()
    assert "fmcluster_slurm_collector_success 1" in text
    assert 'fmcluster_slurm_node_responding{slurm_node="gpu-2"} 0' in text


def test_install_sh_runs_the_collector_on_any_slurm_node_with_slurms_path() -> None:
    text = INSTALL.read_text()
    assert "--slurm-collector|--slurm-controller) slurm_collector=1" in text  # the old flag keeps working
    assert re.search(r'^SLURM_PATH="/opt/slurm/bin:[^"]*:/usr/bin:[^"]*"$', text, re.M)
    unit = text[text.index("fmcluster-slurm-textfile.service <<EOF"):]
    unit = unit[:unit.index("\nEOF\n")]
    assert "Environment=PATH=$SLURM_PATH" in unit


def user_data(template: dict, logical_prefix: str) -> str:
    [lt] = [r for k, r in template["Resources"].items()
            if r["Type"] == "AWS::EC2::LaunchTemplate" and k.startswith(logical_prefix)]
    parts = lt["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
    return "".join(p for p in parts if isinstance(p, str))


def test_the_pcs_login_node_runs_the_slurm_collector() -> None:
    template = json.loads((REPO / "templates/pcs-p5/pcs-p5-cluster.template.json").read_text())
    login = user_data(template, "LoginLaunchTemplate")
    assert "observability/install.sh" in login
    assert "--node-group login --no-dcgm --slurm-collector" in login
    gpu = user_data(template, "H100")
    assert "observability/install.sh" in gpu and "--slurm-collector" not in gpu  # one collector per cluster

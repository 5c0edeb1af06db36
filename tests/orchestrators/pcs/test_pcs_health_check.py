"""Slurm's health check on PCS: off by default (that PCS takes these parameters is unverified); switched on, the
cluster's SlurmCustomSettings name the program every PCS node's boot writes before slurmd starts."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from aws_cdk import Stack
from aws_cdk.assertions import Template
from helpers import ROOT, resources_of

from fmcluster.app import new_app
from fmcluster.orchestrators.pcs.cluster import PcsCluster
from fmcluster.orchestrators.pcs.construct import health_check_settings
from fmcluster.registry import parse_spec
from fmcluster.runtime import health_check
from fmcluster.spec import SpecError

EXAMPLE = yaml.safe_load((ROOT / "examples" / "pcs-p5.yaml").read_text())


def spec_with(**pcs):
    data = copy.deepcopy(EXAMPLE)
    data["orchestrator"].setdefault("pcs", {}).update(pcs)
    return parse_spec(data)


@pytest.fixture(scope="module")
def p5(synth_example):
    return synth_example("pcs-p5")["pcs-p5-cluster"]


def test_off_by_default(p5):
    (cluster,) = resources_of(p5, "AWS::PCS::Cluster").values()
    names = [s["ParameterName"] for s in cluster["Properties"]["SlurmConfiguration"].get("SlurmCustomSettings", [])]
    assert not [n for n in names if n.startswith("HealthCheck")]
    assert health_check_settings(SimpleNamespace(spec=spec_with())) == {}


def test_switched_on_the_cluster_runs_each_nodes_program_on_busy_nodes_too():
    settings = health_check_settings(SimpleNamespace(spec=spec_with(health_check=True,
                                                                    health_check_interval_seconds=900)))
    assert settings == {"HealthCheckProgram": "/opt/fmcluster/slurm/health_check.sh", "HealthCheckInterval": "900",
                        "HealthCheckNodeState": "ANY,CYCLE"}
    stack = Stack(new_app(nag=False), "T")
    PcsCluster(stack, "Pcs", subnet_ids=["subnet-0123456789abcdef0"], security_group_ids=["sg-0123456789abcdef0"],
               slurm_version="24.11", size="SMALL", slurm_settings=settings)
    (cluster,) = Template.from_stack(stack).find_resources("AWS::PCS::Cluster").values()
    assert {"ParameterName": "HealthCheckProgram", "ParameterValue": health_check.program_path()} in \
        cluster["Properties"]["SlurmConfiguration"]["SlurmCustomSettings"]


def test_an_interval_below_a_minute_is_refused_at_its_field():
    with pytest.raises(SpecError) as e:
        spec_with(health_check=True, health_check_interval_seconds=59)
    assert any(p.startswith("orchestrator.pcs.health_check_interval_seconds") for p in e.value.problems)


def test_every_pcs_node_writes_the_program_at_boot_before_slurmd(tmp_path):
    """node_bootstrap.sh (PCS user data runs it before slurmd starts) writes the program the setting names, with the
    node's profile, whatever the validation verdict; a stand-in validator answers."""
    home = tmp_path / "home"
    (home / "pkg").mkdir(parents=True)
    (home / "pkg" / "fmcluster").symlink_to(ROOT / "fmcluster")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\ncase "$*" in *fmcluster.runtime.validate*) '
                                     f'echo \'{{"verdict": "pass"}}\'; exit 0;; esac\nexec {sys.executable} "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"instance_type": "p5.48xlarge", "orchestrator": "slurm", "policy": "drain"}))
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin", FMCLUSTER_HOME=str(home), FMCLUSTER_POLICY="drain",
               FMCLUSTER_PROFILE=str(profile), FMCLUSTER_LOG_DIR=str(tmp_path / "log"),
               FMCLUSTER_TEXTFILE_DIR=str(tmp_path / "tf"), FMCLUSTER_SYSTEMD_DIR=str(tmp_path),
               FMCLUSTER_STATE_DIR=str(tmp_path / "state"))
    script = ROOT / "fmcluster" / "runtime" / "node_bootstrap.sh"
    assert subprocess.run(["bash", str(script)], env=env, timeout=60).returncode == 0
    program = Path(health_check.program_path(str(home / "slurm")))
    assert f"--profile {profile}" in program.read_text() and os.access(program, os.X_OK)
    assert health_check.program_path() == "/opt/fmcluster/slurm/health_check.sh", "the default FMCLUSTER_HOME's"

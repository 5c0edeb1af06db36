"""The OnNodeConfigured script, run with stand-ins for aws, systemctl, hostname, the collectors' installer and the
validator: each policy does what docs/parallelcluster.md says on ParallelCluster, the Slurm node name and
ParallelCluster's Slurm are what the validator uses, the head node runs the Slurm collector."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List, Optional

import pytest

from fmcluster.constructs.node_bootstrap import RUNTIME_DIR
from fmcluster.orchestrators.parallelcluster.node_script import SCRIPT

NODE = "gpu-st-p5-48xlarge-1"  # <queue>-st-<compute resource>-<n>: ParallelCluster's static node name
PROFILE = {"instance_type": "p5.48xlarge", "orchestrator": "slurm", "group": "gpu", "policy": "fail"}


def test_bash_syntax_and_shellcheck():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    r = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


@pytest.fixture(scope="module")
def runtime_zip(tmp_path_factory) -> Path:
    """The runtime as its asset zips it, with the collectors' installer replaced by a recorder."""
    path = tmp_path_factory.mktemp("asset") / "runtime.zip"
    with zipfile.ZipFile(path, "w") as z:
        for f in RUNTIME_DIR.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts:
                rel = f.relative_to(RUNTIME_DIR).as_posix()
                if rel == "observability/install.sh":
                    z.writestr(rel, '#!/bin/bash\necho "$@" >> "$FMCLUSTER_TEST_LOG/install.log"\n')
                else:
                    z.write(f, rel)
    return path


class Node:
    """A fake node under tmp_path: directories the script writes, stand-in commands, logs of what ran."""

    def __init__(self, tmp: Path, runtime_zip: Path, *, healthy: bool = True, gpu: bool = True, docker: bool = False,
                 nodename_file: Optional[str] = None, nvme: bool = True, fetch_ok: bool = True) -> None:
        self.tmp = tmp
        self.log = tmp / "calls"
        self.root = tmp / "root"
        for d in (self.log, tmp / "bin", self.root / "proc", self.root / "dev", self.root / "etc" / "docker",
                  self.root / "etc" / "enroot", tmp / "units", tmp / "pcluster" / "scripts" / "imds", tmp / "slurm"):
            d.mkdir(parents=True, exist_ok=True)
        mounts = "/dev/nvme0n1p1 / ext4 rw 0 0\n" + ("/dev/md0 /opt/dlami/nvme ext4 rw 0 0\n" if nvme else "")
        (self.root / "proc" / "mounts").write_text(mounts)
        if gpu:
            (self.root / "dev" / "nvidia0").write_text("")
        self._cmd("aws", f'echo "$@" >> {self.log}/aws.log\n' + (f'cp {runtime_zip} "${{@: -1}}"\n' if fetch_ok else "exit 1\n"))
        self._cmd("systemctl", f'echo "$@" >> {self.log}/systemctl.log\ncase "$1" in is-active) exit 1;; esac\n')
        # the short host name is the Slurm node name; the full one carries ParallelCluster's DNS domain
        self._cmd("hostname", f'case "$1" in -s) echo {NODE};; *) echo {NODE}.pc.pcluster;; esac\n')
        if docker:
            self._cmd("docker", "exit 0\n")
        # python3: the real one, except the validator, which records its arguments and PATH and answers
        self._cmd("python3", (
            'case "$*" in *fmcluster.runtime.validate*) '
            f'echo "$@" >> {self.log}/validate.log; echo "PATH=$PATH" >> {self.log}/validate-env.log; '
            f"echo '{{\"verdict\": \"{'pass' if healthy else 'fail'}\"}}'; exit {0 if healthy else 1};; esac\n"
            f'exec {sys.executable} "$@"\n'))
        self._cmd("imds-access.sh", f'echo "$@" >> {self.log}/imds.log\n', where=tmp / "pcluster" / "scripts" / "imds")
        self.nodename = tmp / "slurm_nodename"
        if nodename_file is not None:
            self.nodename.write_text(nodename_file)

    def _cmd(self, name: str, body: str, where: Optional[Path] = None) -> None:
        path = (where or self.tmp / "bin") / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, PATH=f"{self.tmp / 'bin'}:/usr/bin:/bin", FMCLUSTER_HOME=str(self.tmp / "home"),
                   FMCLUSTER_ETC=str(self.tmp / "etc"), FMCLUSTER_LOG_DIR=str(self.tmp / "log"),
                   FMCLUSTER_TEXTFILE_DIR=str(self.tmp / "textfile"), FMCLUSTER_SYSTEMD_DIR=str(self.tmp / "units"),
                   FMCLUSTER_SLURM_BIN=str(self.tmp / "slurm"), FMCLUSTER_PCLUSTER_DIR=str(self.tmp / "pcluster"),
                   FMCLUSTER_NODENAME_FILE=str(self.nodename), FMCLUSTER_ROOT=str(self.root),
                   FMCLUSTER_RETRY_DELAY="0", FMCLUSTER_TEST_LOG=str(self.log))
        return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)

    def calls(self, name: str) -> List[str]:
        path = self.log / f"{name}.log"
        return path.read_text().splitlines() if path.exists() else []

    def file(self, rel: str) -> str:
        return (self.tmp / rel).read_text()


def compute_args(policy: str = "fail", level: str = "standard", collectors: bool = True) -> List[str]:
    args = ["--role", "compute", "--runtime", "s3://assets/runtime.zip", "--region", "us-east-1",
            "--profile-b64", base64.b64encode(json.dumps(PROFILE).encode()).decode(), "--level", level, "--policy", policy]
    if collectors:
        args += ["--cluster", "pc", "--remote-write-url", "https://aps/api/v1/remote_write", "--scrape-interval", "30",
                 "--node-group", "gpu"]
    return args


HEAD_ARGS = ["--role", "head", "--runtime", "s3://assets/runtime.zip", "--region", "us-east-1", "--cluster", "pc",
             "--remote-write-url", "https://aps/api/v1/remote_write", "--scrape-interval", "30", "--node-group", "head-node"]


@pytest.mark.parametrize("policy", ["fail", "report"])
def test_a_healthy_node_passes_under_every_policy(tmp_path, runtime_zip, policy):
    node = Node(tmp_path, runtime_zip, healthy=True)
    r = node.run(*compute_args(policy))
    assert r.returncode == 0, node.file("log/on-node-configured.log")
    assert "node validation passed" in node.file("log/on-node-configured.log")
    assert not (tmp_path / "units" / "fmcluster-validate.service").exists()
    assert json.loads(node.file("etc/profile.json")) == PROFILE
    fetch = f"s3 cp --only-show-errors --region us-east-1 s3://assets/runtime.zip {tmp_path}/home/runtime.zip"
    assert node.calls("aws") == [fetch]


def test_the_boot_run_waits_for_slurmd_and_parallelclusters_resume_and_names_the_slurm_node(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, healthy=True)
    assert node.run(*compute_args("fail")).returncode == 0
    (call,) = node.calls("validate")
    assert "--policy report" in call and "--level standard" in call
    assert "--skip orch.agent --skip orch.slurm_node" in call and f"--node-name {NODE}" in call
    (env,) = node.calls("validate-env")
    assert env.startswith(f"PATH={tmp_path}/slurm:/opt/amazon/efa/bin:")


def test_the_slurm_node_name_comes_from_parallelclusters_file_when_there(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, healthy=True, nodename_file="train-dy-p5-48xlarge-7\n")
    assert node.run(*compute_args("fail")).returncode == 0
    assert "--node-name train-dy-p5-48xlarge-7" in node.calls("validate")[0]


def test_fail_policy_fails_the_bootstrap_so_parallelcluster_replaces_the_node(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, healthy=False)
    assert node.run(*compute_args("fail")).returncode == 1
    assert json.loads(node.file("log/validate.json")) == {"verdict": "fail"}
    assert not (tmp_path / "units" / "fmcluster-validate.service").exists()


def test_report_policy_only_reports(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, healthy=False)
    assert node.run(*compute_args("report")).returncode == 0
    assert not (tmp_path / "units" / "fmcluster-validate.service").exists()


def test_there_is_no_drain_on_parallelcluster(tmp_path, runtime_zip):
    """clustermgtd replaces a drained static node: the script refuses drain (the spec does too) and installs no
    unit that would drain the node on this or any later boot."""
    node = Node(tmp_path, runtime_zip, healthy=False)
    assert node.run(*compute_args("drain")).returncode == 2
    assert node.run(*compute_args("fail")).returncode == 1
    assert not any((tmp_path / "units").glob("fmcluster-validate*"))
    assert not [c for c in node.calls("systemctl") if c.split()[0] in ("enable", "start")]


@pytest.mark.parametrize("policy, code", [("fail", 1), ("report", 0)])
def test_a_runtime_that_cannot_be_fetched_is_an_unhealthy_node(tmp_path, runtime_zip, policy, code):
    node = Node(tmp_path, runtime_zip, fetch_ok=False)
    assert node.run(*compute_args(policy)).returncode == code
    assert len(node.calls("aws")) == 6 and node.calls("validate") == []
    assert "cannot fetch the fmcluster runtime" in node.file("log/on-node-configured.log")
    assert not (tmp_path / "units" / "fmcluster-validate.service").exists()


@pytest.mark.parametrize("args", [
    ["--role", "login", "--runtime", "s3://a/b", "--region", "r"],
    ["--role", "compute", "--runtime", "s3://a/b", "--region", "r"],
    compute_args("taint"),
    ["--role", "head", "--bogus", "x"],
])
def test_usage_errors_exit_2(tmp_path, runtime_zip, args):
    assert Node(tmp_path, runtime_zip).run(*args).returncode == 2


def test_gpu_compute_nodes_install_collectors_without_dcgm_when_the_ami_has_no_docker(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, gpu=True, docker=False)
    assert node.run(*compute_args()).returncode == 0
    (call,) = node.calls("install")
    assert call.startswith("--cluster pc --region us-east-1 --remote-write-url https://aps/api/v1/remote_write")
    assert "--node-group gpu" in call and "--no-dcgm" in call and "--slurm-controller" not in call
    assert "no docker on this AMI" in node.file("log/on-node-configured.log")


def test_gpu_compute_nodes_with_docker_run_dcgm_exporter(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, gpu=True, docker=True)
    assert node.run(*compute_args()).returncode == 0
    assert "--no-dcgm" not in node.calls("install")[0]


def test_without_observability_no_collectors(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip)
    assert node.run(*compute_args(collectors=False)).returncode == 0
    assert node.calls("install") == []


def test_the_head_node_runs_the_slurm_collector_with_parallelclusters_sinfo_and_credentials(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, gpu=False)
    assert node.run(*HEAD_ARGS).returncode == 0
    (call,) = node.calls("install")
    assert "--slurm-controller --no-dcgm" in call and "--node-group head-node" in call
    dropin = node.file("units/fmcluster-slurm-textfile.service.d/parallelcluster.conf")
    assert dropin.startswith(f"[Service]\nEnvironment=PATH={tmp_path}/slurm:")
    assert node.calls("imds") == ["--allow fmcluster-metrics"]
    assert node.calls("validate") == []  # no boot validation on the head node


def test_container_data_moves_to_the_instance_nvme(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip)
    assert node.run(*compute_args()).returncode == 0
    daemon = json.loads((node.root / "etc" / "docker" / "daemon.json").read_text())
    assert daemon["data-root"] == "/opt/dlami/nvme/docker/data-root"
    enroot = (node.root / "etc" / "enroot" / "enroot.conf").read_text()
    assert "ENROOT_DATA_PATH /opt/dlami/nvme/enroot/data/user-${UID}" in enroot
    assert (node.root / "opt" / "dlami" / "nvme" / "enroot" / "cache").is_dir()


def test_without_instance_nvme_container_data_stays(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, nvme=False)
    assert node.run(*compute_args()).returncode == 0
    assert not (node.root / "etc" / "docker" / "daemon.json").exists()
    assert "container data left where the AMI puts it" in node.file("log/on-node-configured.log")

"""The OnNodeConfigured script, run with stand-ins for aws, systemctl, hostname, the collectors' installer and the
validator: each policy does what docs/parallelcluster.md says on ParallelCluster, the Slurm node name and
ParallelCluster's Slurm are what the validator uses, the head node runs the Slurm collector.

Each run costs a second of CPU, so tests that assert on the same run share it (a healthy compute node's boot, the head
node's boot: module-scoped), and each other test runs the path it is about."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

from fmcluster.constructs.node_bootstrap import RUNTIME_DIR
from fmcluster.constructs.runtime_archive import archive_members, node_folders
from fmcluster.orchestrators.parallelcluster.node_script import SCRIPT

NODE = "gpu-st-p5-48xlarge-1"  # <queue>-st-<compute resource>-<n>: ParallelCluster's static node name
PROFILE = {"instance_type": "p5.48xlarge", "orchestrator": "slurm", "group": "gpu", "policy": "fail",
           "level": "standard"}


@pytest.fixture(scope="module")
def runtime_zip(tmp_path_factory) -> Path:
    """The runtime archive's files, with the collectors' installer replaced by a recorder."""
    path = tmp_path_factory.mktemp("asset") / "runtime.zip"
    with zipfile.ZipFile(path, "w") as z:
        for rel, f in sorted(archive_members(RUNTIME_DIR, with_folders=node_folders()).items()):
            if rel == "observability/install.sh":
                z.writestr(rel, '#!/bin/bash\necho "$@" >> "$FMCLUSTER_TEST_LOG/install.log"\n')
            else:
                z.write(f, rel)
    return path


SOURCE = "s3://assets-bucket/fmcluster/"
SETTINGS = {"cluster": "pc", "remote_write_url": "https://aps/api/v1/remote_write", "scrape_interval": 30}


class Node:
    """A fake node under tmp_path: directories the script writes, the published objects under SOURCE (a directory
    the fake `aws s3 cp` copies from), stand-in commands, logs of what ran."""

    def __init__(self, tmp: Path, runtime_zip: Path, *, healthy: bool = True, gpu: bool = True, docker: bool = False,
                 nodename_file: Optional[str] = None, nvme: bool = True, fetch_ok: bool = True,
                 settings: Optional[Dict[str, Any]] = None, missing: Sequence[str] = (),
                 report: Optional[Dict[str, Any]] = None, profile: Optional[Dict[str, Any]] = None) -> None:
        self.tmp = tmp
        self.log = tmp / "calls"
        self.root = tmp / "root"
        self.bucket = tmp / "bucket"
        for d in (self.log, tmp / "bin", self.root / "proc", self.root / "dev", self.root / "etc" / "docker",
                  self.root / "etc" / "enroot", tmp / "units", tmp / "pcluster" / "scripts" / "imds", tmp / "slurm",
                  self.bucket / "profiles", self.bucket / "groups", self.bucket / "runtime"):
            d.mkdir(parents=True, exist_ok=True)
        # ParallelCluster's Prolog/Epilog directories, each with its own script (shared from the head node)
        self.scripts = tmp / "slurm-etc" / "scripts"
        for d, own in (("prolog.d", "90_pcluster_health_check_manager"), ("epilog.d", "90_pcluster_noop")):
            (self.scripts / d).mkdir(parents=True)
            (self.scripts / d / own).write_text("#!/bin/bash\n")
        self.runtime_key = self.publish_runtime(runtime_zip.read_bytes())
        settings = dict(SETTINGS if settings is None else settings)
        settings.setdefault("runtime", {"key": self.runtime_key, "sha256": self.runtime_key[8:-4]})
        self.publish(settings, PROFILE if profile is None else profile)
        for key in missing:
            (self.bucket / (self.runtime_key if key == "runtime" else key)).unlink()
        mounts = "/dev/nvme0n1p1 / ext4 rw 0 0\n" + ("/dev/md0 /opt/dlami/nvme ext4 rw 0 0\n" if nvme else "")
        (self.root / "proc" / "mounts").write_text(mounts)
        if gpu:
            (self.root / "dev" / "nvidia0").write_text("")
        # aws s3 cp ... SOURCE/KEY DEST: the published object, S3's 404 as the CLI prints it, or a failure
        # aws s3 cp ... FILE SOURCE/KEY: an upload (a node report) into the bucket directory
        copy = (f'src="${{@: -2:1}}"; dst="${{@: -1}}"\n'
                f'case "$src" in s3://*) ;; *) mkdir -p "$(dirname "{self.bucket}/${{dst#{SOURCE}}}")"; '
                f'exec cp "$src" "{self.bucket}/${{dst#{SOURCE}}}";; esac\n'
                f'key="${{src#{SOURCE}}}"\n'
                f'[ -f "{self.bucket}/$key" ] || {{ echo "fatal error: An error occurred (404) when calling the '
                f'HeadObject operation: Key \\"$key\\" does not exist" >&2; exit 1; }}\n'
                f'cp "{self.bucket}/$key" "$dst"\n') if fetch_ok else "exit 1\n"
        self._cmd("aws", f'echo "$@" >> {self.log}/aws.log\n' + copy)
        self._cmd("systemctl", f'echo "$@" >> {self.log}/systemctl.log\ncase "$1" in is-active) exit 1;; esac\n')
        # the short host name is the Slurm node name; the full one carries ParallelCluster's DNS domain
        self._cmd("hostname", f'case "$1" in -s) echo {NODE};; *) echo {NODE}.pc.pcluster;; esac\n')
        if docker:
            self._cmd("docker", "exit 0\n")
        self._cmd("logger", f'echo "$@" >> {self.log}/logger.log\n')
        answer = json.dumps(report if report is not None else {"verdict": "pass" if healthy else "fail"})
        (tmp / "answer.json").write_text(answer)
        # python3: the real one without site-packages (node-side code is standard library only; -S also spares each
        # start the virtual environment's .pth files), except the validator, which records its arguments and PATH
        # and answers
        self._cmd("python3", (
            'case "$*" in *fmcluster.runtime.validate*) '
            f'echo "$@" >> {self.log}/validate.log; echo "PATH=$PATH" >> {self.log}/validate-env.log; '
            f"cat {tmp / 'answer.json'}; exit {0 if healthy else 1};; esac\n"
            f'exec {sys.executable} -S "$@"\n'))
        self._cmd("imds-access.sh", f'echo "$@" >> {self.log}/imds.log\n', where=tmp / "pcluster" / "scripts" / "imds")
        self.nodename = tmp / "slurm_nodename"
        if nodename_file is not None:
            self.nodename.write_text(nodename_file)

    def publish(self, settings: Dict[str, Any], profile: Dict[str, Any]) -> None:
        """What NodeAssets writes: settings.json (the head node's), groups/gpu.json (a compute node's: the settings
        and the profile in one object) and profiles/gpu.json (for scripts of earlier releases)."""
        (self.bucket / "settings.json").write_text(json.dumps(settings))
        (self.bucket / "profiles" / "gpu.json").write_text(json.dumps(profile))
        group = {"schema": 1, "group": "gpu", "settings": settings, "profile": profile,
                 "reports": {"url": f"{SOURCE}node-reports/gpu/", "region": "us-east-1",
                             "pointer": "fmcluster/groups/gpu.json", "platform": "ec2"}}
        (self.bucket / "groups" / "gpu.json").write_text(json.dumps(group))

    def write_settings(self, **changes: Any) -> None:
        """The settings as the current deployment writes them, with `changes`."""
        runtime = {"key": self.runtime_key, "sha256": self.runtime_key[8:-4]}
        profile = json.loads((self.bucket / "profiles" / "gpu.json").read_text())
        self.publish({**SETTINGS, "runtime": runtime, **changes}, profile)

    def publish_runtime(self, data: bytes) -> str:
        """The runtime under its content key, as NodeAssets publishes it; returns the key settings.json names."""
        key = f"runtime/{hashlib.sha256(data).hexdigest()}.zip"
        (self.bucket / key).write_bytes(data)
        return key

    def _cmd(self, name: str, body: str, where: Optional[Path] = None) -> None:
        path = (where or self.tmp / "bin") / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, PATH=f"{self.tmp / 'bin'}:/usr/bin:/bin", FMCLUSTER_HOME=str(self.tmp / "home"),
                   FMCLUSTER_ETC=str(self.tmp / "etc"), FMCLUSTER_LOG_DIR=str(self.tmp / "log"),
                   FMCLUSTER_TEXTFILE_DIR=str(self.tmp / "textfile"), FMCLUSTER_SYSTEMD_DIR=str(self.tmp / "units"),
                   FMCLUSTER_SLURM_BIN=str(self.tmp / "slurm"), FMCLUSTER_SLURM_SCRIPTS=str(self.scripts),
                   FMCLUSTER_PCLUSTER_DIR=str(self.tmp / "pcluster"),
                   FMCLUSTER_NODENAME_FILE=str(self.nodename), FMCLUSTER_ROOT=str(self.root),
                   FMCLUSTER_RETRY_DELAY="0", FMCLUSTER_TEST_LOG=str(self.log),
                   FMCLUSTER_ACTION_STAMP=str(self.tmp / "run" / "action-started"))
        # as on a node, python3 caches the runtime's bytecode beside it: the script's later starts skip compiling it
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)

    def calls(self, name: str) -> List[str]:
        path = self.log / f"{name}.log"
        return path.read_text().splitlines() if path.exists() else []

    def fetched(self) -> List[str]:
        """The keys fetched under SOURCE, in order."""
        return [c.split()[-2][len(SOURCE):] for c in self.calls("aws") if c.split()[-2].startswith(SOURCE)]

    def file(self, rel: str) -> str:
        return (self.tmp / rel).read_text()


def compute_args(policy: Optional[str] = None, level: Optional[str] = None, group: str = "gpu") -> List[str]:
    """The queue's Args as fmcluster writes them (level and policy come from the profile), or with the override
    arguments earlier configurations passed."""
    return (["--role", "compute", "--source", SOURCE, "--region", "us-east-1", "--node-group", group]
            + (["--level", level] if level else []) + (["--policy", policy] if policy else []))


HEAD_ARGS = ["--role", "head", "--source", SOURCE, "--region", "us-east-1", "--node-group", "head-node"]
UPDATE_ARGS = HEAD_ARGS + ["--event", "updated", "--revision", "0123456789abcdef"]


@pytest.fixture(scope="module")
def healthy_compute(tmp_path_factory, runtime_zip) -> Node:
    """A healthy GPU compute node with instance NVMe and no docker, booted once with the queue's arguments (its
    profile says level standard, policy fail)."""
    node = Node(tmp_path_factory.mktemp("compute"), runtime_zip, healthy=True)
    r = node.run(*compute_args())
    assert r.returncode == 0, node.file("log/on-node-configured.log")
    return node


@pytest.fixture(scope="module")
def head(tmp_path_factory, runtime_zip) -> Node:
    """The head node (no GPU), booted once."""
    node = Node(tmp_path_factory.mktemp("head"), runtime_zip, gpu=False)
    assert node.run(*HEAD_ARGS).returncode == 0, node.file("log/on-node-configured.log")
    return node


def test_a_healthy_node_passes(healthy_compute):
    node, tmp_path = healthy_compute, healthy_compute.tmp
    assert "node validation passed" in node.file("log/on-node-configured.log")
    assert not (tmp_path / "units" / "fmcluster-validate.service").exists()
    assert json.loads(node.file("etc/profile.json")) == PROFILE
    assert node.fetched() == ["groups/gpu.json", node.runtime_key]
    assert node.calls("aws")[-1] == (f"s3 cp --only-show-errors --region us-east-1 {SOURCE}{node.runtime_key} "
                                     f"{tmp_path}/home/runtime.zip")


def test_the_boot_run_waits_for_slurmd_and_parallelclusters_resume_and_names_the_slurm_node(healthy_compute):
    node, tmp_path = healthy_compute, healthy_compute.tmp
    (call,) = node.calls("validate")
    assert "--policy report" in call and "--level standard" in call
    assert "--skip orch.agent --skip orch.slurm_node" in call and f"--node-name {NODE}" in call
    (env,) = node.calls("validate-env")
    assert env.startswith(f"PATH={tmp_path}/slurm:/opt/amazon/efa/bin:")


def test_the_slurm_node_name_comes_from_parallelclusters_file_when_there(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, healthy=True, nodename_file="train-dy-p5-48xlarge-7\n")
    assert node.run(*compute_args("fail")).returncode == 0
    assert "--node-name train-dy-p5-48xlarge-7" in node.calls("validate")[0]


FAILED_REPORT = {
    "verdict": "fail", "failing": ["gpu.count"],
    "checks": [
        {"id": "gpu.count", "layer": "gpu", "required": True, "status": "fail", "observed": 7, "expected": 8,
         "detail": "nvidia-smi lists 7 GPUs"},
        {"id": "efa.devices", "layer": "network", "required": True, "status": "pass", "observed": 32, "expected": 32},
    ],
}


@pytest.mark.parametrize("level, policy, code", [("fast", "report", 0), ("standard", "fail", 1)])
def test_a_failed_validation_fails_the_bootstrap_under_fail_and_only_reports_under_report(tmp_path, runtime_zip, level,
                                                                                           policy, code):
    """Policy fail fails the bootstrap, so ParallelCluster replaces the node; report only reports. Either way the
    failing checks are named on stderr (ParallelCluster keeps the custom action's stderr; the node itself shuts down
    under policy fail, taking the log file with it) and in the journal, and no unit is left to drain the node later.
    The queue's arguments never change with validation settings (a change would replace its nodes): the node applies
    the level and policy its group's published profile says."""
    node = Node(tmp_path, runtime_zip, healthy=False, report=FAILED_REPORT,
                profile={**PROFILE, "level": level, "policy": policy})
    r = node.run(*compute_args())
    assert r.returncode == code
    assert f"--level {level}" in node.calls("validate")[0]
    assert json.loads(node.file("log/validate.json")) == FAILED_REPORT
    assert "gpu.count fail: 7 (expected 8) - nvidia-smi lists 7 GPUs" in r.stderr
    assert "efa.devices" not in r.stderr
    journal = node.calls("logger")
    assert any("-t fmcluster" in line and "gpu.count fail: 7 (expected 8)" in line for line in journal)
    assert "gpu.count fail" in node.file("log/on-node-configured.log")
    assert not any((tmp_path / "units").glob("fmcluster-validate*"))
    assert not [c for c in node.calls("systemctl") if c.split()[0] in ("enable", "start")]


def test_a_node_that_cannot_fetch_its_runtime_says_why_on_stderr_and_in_the_journal(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, fetch_ok=False)
    r = node.run(*compute_args("fail"))
    assert r.returncode == 1
    assert "node not healthy (boot." in r.stderr
    assert any("node not healthy (boot." in line for line in node.calls("logger"))


def _timeouts(node: Node, marker: str) -> List[int]:
    """The durations `timeout` was given for commands naming `marker`."""
    out = []
    for line in node.calls("timeout"):
        if marker in line:
            words = [w for w in line.split() if not w.startswith("--")]
            out.append(int(words[0]))
    return out


@pytest.mark.parametrize("budget,validator,collectors", [(None, 1140, 480), ("100", 40, 40)])
def test_every_step_fits_one_budget_inside_slurms_resume_timeout(tmp_path, runtime_zip, monkeypatch, budget,
                                                                  validator, collectors):
    """A compute node must register within ResumeTimeout (2100 s): the collectors, the validator and each fetch attempt
    get what is left of the action's budget, and the collectors leave the validator its share."""
    node = Node(tmp_path, runtime_zip)
    node._cmd("timeout", f'echo "$@" >> {node.log}/timeout.log\n'
                         'while [[ "$1" == --* ]]; do shift; done\nshift\nexec "$@"\n')
    if budget is not None:
        monkeypatch.setenv("FMCLUSTER_ACTION_BUDGET", budget)
    assert node.run(*compute_args("fail")).returncode == 0
    (validate,) = _timeouts(node, "fmcluster.runtime.validate")
    (install,) = _timeouts(node, "install.sh")
    assert 0 < validate <= validator and 0 < install <= collectors
    fetches = _timeouts(node, "s3 cp")
    assert fetches and all(0 < f <= min(300, int(budget or 1200)) for f in fetches)


@pytest.mark.parametrize("age, validator, collectors", [(500, 640, 280), (700, 1140, 480)])
def test_the_action_counts_its_budget_from_where_mounts_sh_started_the_window(tmp_path, runtime_zip, age, validator,
                                                                               collectors):
    """mounts.sh ran first and stamped "START BUDGET" (600 s): 500 s later the action has 1,200 - 500 s left; a stamp
    older than mounts.sh's own budget is not from this sequence and changes nothing."""
    import time

    node = Node(tmp_path, runtime_zip)
    node._cmd("timeout", f'echo "$@" >> {node.log}/timeout.log\n'
                         'while [[ "$1" == --* ]]; do shift; done\nshift\nexec "$@"\n')
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "action-started").write_text(f"{int(time.time()) - age} 600\n")
    assert node.run(*compute_args("fail")).returncode == 0
    (validate,) = _timeouts(node, "fmcluster.runtime.validate")
    (install,) = _timeouts(node, "install.sh")
    assert validator - 5 <= validate <= validator and collectors - 5 <= install <= collectors
    assert ("mounts.sh took" in node.file("log/on-node-configured.log")) == (age == 500)


def test_there_is_no_drain_on_parallelcluster(tmp_path, runtime_zip):
    """clustermgtd replaces a drained static node: the script refuses drain (the spec does too) and installs no
    unit that would drain the node on this or any later boot (a failed validation under fail or report installs
    none either: test_a_failed_validation_fails_the_bootstrap_under_fail_and_only_reports_under_report)."""
    node = Node(tmp_path, runtime_zip, healthy=False)
    assert node.run(*compute_args("drain")).returncode == 2
    assert not any((tmp_path / "units").glob("fmcluster-validate*"))
    assert not [c for c in node.calls("systemctl") if c.split()[0] in ("enable", "start")]


@pytest.mark.parametrize("policy, code", [("fail", 1), ("report", 0)])
def test_a_runtime_that_cannot_be_fetched_is_an_unhealthy_node(tmp_path, runtime_zip, policy, code):
    node = Node(tmp_path, runtime_zip, missing=["runtime"])
    assert node.run(*compute_args(policy)).returncode == code
    assert node.fetched()[-6:] == [node.runtime_key] * 6 and node.calls("validate") == []
    assert "cannot fetch the fmcluster runtime" in node.file("log/on-node-configured.log")
    assert not (tmp_path / "units" / "fmcluster-validate.service").exists()


@pytest.mark.parametrize("missing, what", [("settings.json", "boot.settings"), ("profiles/gpu.json", "boot.profile")])
def test_settings_or_a_profile_that_cannot_be_fetched_fail_the_node(tmp_path, runtime_zip, missing, what):
    """A bucket an earlier release filled (no groups/ object) missing one of the two objects it read."""
    node = Node(tmp_path, runtime_zip, missing=["groups/gpu.json", missing])
    assert node.run(*compute_args("fail")).returncode == 1
    assert what in node.file("log/on-node-configured.log") and node.calls("validate") == []


def test_a_node_gets_one_deployments_settings_runtime_and_profile_from_one_object(tmp_path, runtime_zip):
    """A deploy rewrites the bucket object by object: a node booting meanwhile may find settings.json already naming
    the next runtime while its group's object is still the last deployment's. It reads only the group's object, so
    the runtime and the profile it runs come from the same deployment."""
    node = Node(tmp_path, runtime_zip, profile={**PROFILE, "level": "fast"})
    newer = node.publish_runtime(runtime_zip.read_bytes() + b"next release")
    (node.bucket / "settings.json").write_text(json.dumps({**SETTINGS, "runtime": {"key": newer, "sha256": newer[8:-4]}}))
    assert node.run(*compute_args()).returncode == 0
    assert node.fetched() == ["groups/gpu.json", node.runtime_key]
    assert "--level fast" in node.calls("validate")[0]


def test_a_bucket_an_earlier_release_filled_is_read_as_that_release_did(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, missing=["groups/gpu.json"])
    assert node.run(*compute_args()).returncode == 0
    assert node.fetched() == ["groups/gpu.json", "settings.json", "profiles/gpu.json", node.runtime_key]
    assert "an earlier layout" in node.file("log/on-node-configured.log")


def test_a_compute_node_reports_its_runtime_and_verdict_for_status(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, healthy=False, report=FAILED_REPORT, profile={**PROFILE, "policy": "report"})
    tag = node.root / "sys" / "devices" / "virtual" / "dmi" / "id" / "board_asset_tag"
    tag.parent.mkdir(parents=True)
    tag.write_text("i-0123456789abcdef0\n")
    assert node.run(*compute_args()).returncode == 0
    report = json.loads((node.bucket / "node-reports" / "gpu" / "i-0123456789abcdef0.json").read_text())
    assert report["verdict"] == "fail" and report["failing"] == ["gpu.count"]
    assert report["runtime"] == node.runtime_key[8:-4] and report["group"] == "gpu"


def test_another_groups_object_fails_the_node(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip)
    group = json.loads((node.bucket / "groups" / "gpu.json").read_text())
    (node.bucket / "groups" / "gpu.json").write_text(json.dumps({**group, "group": "cpu"}))
    assert node.run(*compute_args("fail")).returncode == 1
    assert "groups/gpu.json is not what fmcluster writes" in node.file("log/on-node-configured.log")


def test_settings_that_are_not_fmclusters_fail_the_node(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, settings={"cluster": "two words", "remote_write_url": "https://aps/x"})
    assert node.run(*compute_args("fail")).returncode == 1
    assert "boot.settings" in node.file("log/on-node-configured.log")


def test_a_new_runtime_reaches_a_node_at_its_next_launch_under_the_same_arguments(tmp_path, runtime_zip):
    """The arguments name stable keys only: what the bucket holds when the node starts is what it runs."""
    node = Node(tmp_path, runtime_zip)
    assert node.run(*compute_args()).returncode == 0
    marker = tmp_path / "home" / "pkg" / "fmcluster" / "runtime" / "RELEASE"
    assert not marker.exists()
    newer = tmp_path / "newer.zip"
    shutil.copy(runtime_zip, newer)
    with zipfile.ZipFile(newer, "a") as z:
        z.writestr("RELEASE", "a later fmcluster\n")
    key = node.publish_runtime(newer.read_bytes())
    node.runtime_key = key
    node.write_settings()
    assert node.run(*compute_args()).returncode == 0
    assert marker.read_text() == "a later fmcluster\n"
    assert (node.bucket / node.runtime_key).exists(), "the older runtime stays for nodes that read older settings"


def test_a_runtime_that_does_not_match_the_sha256_settings_names_is_never_unpacked(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip)
    (node.bucket / node.runtime_key).write_bytes(b"PK truncated")
    assert node.run(*compute_args()).returncode == 1
    assert "does not match the sha256" in node.file("log/on-node-configured.log")
    assert node.calls("validate") == [] and not (tmp_path / "home" / "pkg" / "fmcluster" / "runtime").exists()


@pytest.mark.parametrize("profile", [{**PROFILE, "level": "deep"}, {**PROFILE, "policy": "drain"},
                                     {k: v for k, v in PROFILE.items() if k != "level"}])
def test_a_profile_without_a_level_and_policy_parallelcluster_runs_fails_the_node(tmp_path, runtime_zip, profile):
    node = Node(tmp_path, runtime_zip, profile=profile)
    assert node.run(*compute_args()).returncode == 1
    assert "boot.profile" in node.file("log/on-node-configured.log") and node.calls("validate") == []


@pytest.mark.parametrize("args", [
    ["--role", "login", "--source", SOURCE, "--region", "r", "--node-group", "g"],
    ["--role", "compute", "--source", "s3://a/b", "--region", "r", "--node-group", "g"],  # not a prefix
    ["--role", "compute", "--source", SOURCE, "--region", "r"],
    compute_args("taint"),
    compute_args("drain"),
    compute_args(level="deep"),  # refused by the spec: it does not fit the bootstrap
    compute_args() + ["--event", "updated"],
    ["--role", "head", "--bogus", "x"],
])
def test_usage_errors_exit_2(tmp_path, runtime_zip, args):
    assert Node(tmp_path, runtime_zip).run(*args).returncode == 2


def test_gpu_compute_nodes_install_collectors_without_dcgm_when_the_ami_has_no_docker(healthy_compute):
    node = healthy_compute
    (call,) = node.calls("install")
    assert call.startswith("--cluster pc --region us-east-1 --remote-write-url https://aps/api/v1/remote_write")
    assert "--node-group gpu" in call and "--no-dcgm" in call and "--slurm-collector" not in call
    assert "no docker on this AMI" in node.file("log/on-node-configured.log")
    # the missing GPU metrics are a metric themselves (GpuMetricsUnavailable)
    assert 'fmcluster_gpu_metrics_unavailable{reason="no-docker"} 1' in node.file("textfile/fmcluster_gpu_metrics.prom")


def test_gpu_compute_nodes_with_docker_run_dcgm_exporter_and_without_instance_nvme_keep_container_data(tmp_path,
                                                                                                         runtime_zip):
    """Two independent decisions of one boot: docker on the AMI runs dcgm-exporter; no instance NVMe leaves
    container data where the AMI puts it."""
    node = Node(tmp_path, runtime_zip, gpu=True, docker=True, nvme=False)
    assert node.run(*compute_args()).returncode == 0
    assert "--no-dcgm" not in node.calls("install")[0]
    assert not (tmp_path / "textfile" / "fmcluster_gpu_metrics.prom").exists()
    assert not (node.root / "etc" / "docker" / "daemon.json").exists()
    assert "container data left where the AMI puts it" in node.file("log/on-node-configured.log")


def test_without_observability_no_collectors(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, settings={**SETTINGS, "remote_write_url": None})
    assert node.run(*compute_args()).returncode == 0
    assert node.calls("install") == [] and node.calls("validate")


def test_the_head_node_runs_the_slurm_collector_with_parallelclusters_sinfo_and_credentials(head):
    node, tmp_path = head, head.tmp
    assert node.fetched() == ["settings.json", node.runtime_key]  # no profile: no validation
    (call,) = node.calls("install")
    assert "--slurm-collector --no-dcgm" in call and "--node-group head-node" in call
    dropin = node.file("units/fmcluster-slurm-textfile.service.d/parallelcluster.conf")
    assert dropin.startswith(f"[Service]\nEnvironment=PATH={tmp_path}/slurm:")
    assert node.calls("imds") == ["--allow fmcluster-metrics"]
    assert node.calls("validate") == []  # no boot validation on the head node


def test_the_head_node_allows_the_collector_again_after_every_boot(head):
    """ParallelCluster restores its saved iptables rules at boot, without the collector's allow:
    a unit re-runs imds-access.sh after them."""
    node, tmp_path = head, head.tmp
    unit = node.file("units/fmcluster-imds-allow.service")
    assert "After=network-online.target parallelcluster-iptables.service" in unit
    assert f"ExecStart=/usr/bin/timeout --kill-after=10 60 {tmp_path}/pcluster/scripts/imds/imds-access.sh --allow " \
           "fmcluster-metrics" in unit and "TimeoutStartSec=90" in unit
    assert "enable fmcluster-imds-allow.service" in node.calls("systemctl")


def test_an_update_refreshes_the_head_nodes_runtime_collectors_and_health_check_shim(tmp_path, runtime_zip):
    """OnNodeUpdated (after a cluster update): the current runtime and settings, the collectors installed again, and
    the shared health check shim written on every event."""
    node = Node(tmp_path, runtime_zip, gpu=False)
    assert node.run(*HEAD_ARGS).returncode == 0
    node.write_settings(scrape_interval=60)
    shim = node.scripts / "fmcluster_health_check.sh"
    shim.unlink()
    assert node.run(*UPDATE_ARGS).returncode == 0
    assert node.fetched() == ["settings.json", node.runtime_key] * 2
    assert "--scrape-interval 60" in node.calls("install")[-1]
    assert "revision=0123456789abcdef" in node.file("log/on-node-configured.log")
    assert shim.exists()


def test_an_update_that_turns_observability_off_stops_the_head_nodes_collectors(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip, gpu=False)
    for unit in ("fmcluster-collector.service", "fmcluster-node-exporter.service"):
        (tmp_path / "units" / unit).write_text("[Unit]\n")
    node.write_settings(remote_write_url=None)
    assert node.run(*UPDATE_ARGS).returncode == 0
    assert node.calls("install") == []
    calls = node.calls("systemctl")
    assert "disable --now fmcluster-collector.service" in calls and "disable --now fmcluster-node-exporter.service" in calls


@pytest.mark.parametrize("missing", ["settings.json", "runtime"])
def test_the_head_node_never_fails_its_bootstrap_or_an_update(tmp_path, runtime_zip, missing):
    node = Node(tmp_path, runtime_zip, gpu=False, missing=[missing])
    for args in (HEAD_ARGS, UPDATE_ARGS):
        assert node.run(*args).returncode == 0
    assert node.calls("install") == []


def test_container_data_moves_to_the_instance_nvme(healthy_compute):
    node = healthy_compute
    daemon = json.loads((node.root / "etc" / "docker" / "daemon.json").read_text())
    assert daemon["data-root"] == "/opt/dlami/nvme/docker/data-root"
    enroot = (node.root / "etc" / "enroot" / "enroot.conf").read_text()
    assert "ENROOT_DATA_PATH /opt/dlami/nvme/enroot/data/user-${UID}" in enroot
    assert (node.root / "opt" / "dlami" / "nvme" / "enroot" / "cache").is_dir()


def test_the_head_node_registers_the_gpu_job_map_beside_parallelclusters_own_prolog(head):
    node, tmp_path = head, head.tmp
    prolog = node.scripts / "prolog.d" / "80_fmcluster_dcgm_job_map"
    epilog = node.scripts / "epilog.d" / "80_fmcluster_dcgm_job_map"
    # Slurm runs prolog.d in reverse alphabetical order: ParallelCluster's health check first, then ours
    assert sorted(p.name for p in prolog.parent.iterdir()) == ["80_fmcluster_dcgm_job_map",
                                                                "90_pcluster_health_check_manager"]
    assert os.access(prolog, os.X_OK) and os.access(epilog, os.X_OK)
    assert f"exec {tmp_path / 'home' / 'slurm' / 'prolog.sh'}" in prolog.read_text()
    # a compute node without the hook (no collectors there) runs nothing, and its job starts: the hook is moved
    # aside, not deleted, so the shared node stays as booted
    hook = tmp_path / "home" / "slurm" / "prolog.sh"
    hook.rename(hook.with_suffix(".aside"))
    try:
        assert subprocess.run([str(prolog)], env={"SLURM_JOB_ID": "5"}, timeout=30).returncode == 0
    finally:
        hook.with_suffix(".aside").rename(hook)


def test_compute_nodes_leave_the_shared_prolog_to_the_head_node(healthy_compute):
    assert not (healthy_compute.scripts / "prolog.d" / "80_fmcluster_dcgm_job_map").exists()


def test_an_update_that_turns_observability_off_unregisters_the_job_map(tmp_path, runtime_zip):
    node = Node(tmp_path, runtime_zip)
    node.run(*HEAD_ARGS)
    published = json.loads((node.bucket / "settings.json").read_text())  # the same runtime, observability off
    (node.bucket / "settings.json").write_text(json.dumps({**published, "remote_write_url": None}))
    assert node.run(*UPDATE_ARGS).returncode == 0
    assert sorted(p.name for p in (node.scripts / "prolog.d").iterdir()) == ["90_pcluster_health_check_manager"]
    assert sorted(p.name for p in (node.scripts / "epilog.d").iterdir()) == ["90_pcluster_noop"]


def test_compute_nodes_write_their_slurm_health_check_before_slurmd_starts(healthy_compute):
    node = healthy_compute
    text = node.file("home/slurm/health_check.sh")
    assert f"--profile {node.tmp}/etc/profile.json --node-name {NODE}" in text
    assert not (node.scripts / "fmcluster_health_check.sh").exists(), "the shared shim is the head node's"


def test_the_head_node_writes_the_shared_health_check_shim(head):
    from fmcluster.orchestrators.parallelcluster.config import HEALTH_CHECK_SHIM

    node, tmp_path = head, head.tmp
    shim = node.scripts / "fmcluster_health_check.sh"
    assert HEALTH_CHECK_SHIM == f"/opt/slurm/etc/scripts/{shim.name}", "the configuration names what the head writes"
    assert f"{tmp_path}/home/slurm/health_check.sh" in shim.read_text()
    # the head node has no program of its own: the shim succeeds there, as on a node booted before this runtime
    assert subprocess.run([str(shim)], env={}, timeout=30).returncode == 0

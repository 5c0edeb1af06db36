"""on_init_complete.sh end to end in a tmp dir: the deployed S3 layout, fake system commands on PATH, fake lustre
helper / validator / collector installer, and FMCLUSTER_LIFECYCLE_ROOT standing in for the node's /.

Each run costs a second of CPU (a dozen python3 starts), so tests that assert on the same run share it (module-scoped
nodes), and decisions the script only relays (which role, which flag) are tested in-process in
tests/runtime/node_setup/; here each test proves the shell wiring of a different path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from helpers.lifecycle import CONTROLLER_IP, CPU_IP, GPU_IP, params, resource_config

from fmcluster.constructs.runtime_archive import archive_path, node_folders
from fmcluster.platforms.hyperpod.lifecycle_entry import NODE_DIR

REPO = Path(__file__).resolve().parents[3]
RUNTIME = REPO / "fmcluster" / "runtime"
# where the runtime archive puts this platform's node folder, below pkg/fmcluster/runtime
SCRIPT = f"pkg/fmcluster/runtime/{archive_path(NODE_DIR)}/on_init_complete.sh"

FAKE_COMMANDS = {
    # no apt/dpkg lock is held unless the test says so
    "fuser": 'if [ -e "$FAKE_LOG/locks-held" ]; then exit 0; fi; exit 1',
    "systemctl": 'echo "$*" >> "$FAKE_LOG/systemctl.log"; case "$1" in cat|is-active) exit 1;; esac; exit 0',
    "apt-mark": 'echo "$*" >> "$FAKE_LOG/apt-mark.log"',
    "dpkg-query": 'case "$*" in *lustre-client-utils*) printf "install ok installed";; *) exit 1;; esac',
    "useradd": 'echo "$*" >> "$FAKE_LOG/useradd.log"',
    "groupadd": 'echo "$*" >> "$FAKE_LOG/groupadd.log"',
    "usermod": 'echo "$*" >> "$FAKE_LOG/usermod.log"',
    "chown": 'echo "$*" >> "$FAKE_LOG/chown.log"',
    "getent": 'case "$2" in docker) echo "docker:x:999:";; *) exit 2;; esac',
    "id": 'if [ -n "${FAKE_ID_UID:-}" ]; then echo "$FAKE_ID_UID"; exit 0; fi; exit 1',
    "nvidia-smi": 'echo "fake nvidia-smi must not be needed"; exit 1',
}

FAKE_LUSTRE = '''"""Fake lustre helper: records its argv, exits FAKE_LUSTRE_RC."""
import os, sys
with open(os.path.join(os.environ["FAKE_LOG"], "lustre.log"), "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_LUSTRE_RC", "0") != "0":
    print("lustre: mount failed: fake", file=sys.stderr)
sys.exit(int(os.environ.get("FAKE_LUSTRE_RC", "0")))
'''

FAKE_VALIDATE = '''"""Fake validator: records its argv, exits FAKE_VALIDATE_RC."""
import os, sys
with open(os.path.join(os.environ["FAKE_LOG"], "validate.log"), "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
rc = int(os.environ.get("FAKE_VALIDATE_RC", "0"))
print('{"verdict": "%s"}' % ("pass" if rc == 0 else "fail"))
sys.exit(rc)
'''

FAKE_INSTALL = 'echo "$*" >> "$FAKE_LOG/install.log"; exit "${FAKE_INSTALL_RC:-0}"\n'


class Node:
    """One fake HyperPod node: the downloaded lifecycle prefix, the node's / and the fake commands' logs."""

    def __init__(self, tmp: Path, *, ip: str, parameters: Optional[Dict[str, Any]] = None, nvme: bool = True):
        self.tmp, self.ip = tmp, ip
        self.prefix, self.root, self.logs, self.bin = tmp / "s3", tmp / "root", tmp / "fake-logs", tmp / "bin"
        for d in (self.prefix, self.root, self.logs, self.bin):
            d.mkdir(parents=True, exist_ok=True)
        self._layout(parameters if parameters is not None else params())
        (self.root / "opt/ml/config").mkdir(parents=True)
        (self.root / "opt/ml/config/resource_config.json").write_text(json.dumps(resource_config()))
        (self.root / "proc").mkdir()
        mounts = "/dev/nvme0n1p1 / ext4 rw 0 0\n" + ("/dev/md0 /opt/dlami/nvme ext4 rw 0 0\n" if nvme else "")
        (self.root / "proc/mounts").write_text(mounts)
        (self.root / "etc/enroot").mkdir(parents=True)
        (self.root / "etc/systemd/system").mkdir(parents=True)
        (self.root / "etc/enroot/enroot.conf").write_text("#ENROOT_RUNTIME_PATH ${XDG_RUNTIME_DIR}/enroot\n")
        for name, body in FAKE_COMMANDS.items():
            f = self.bin / name
            f.write_text("#!/bin/bash\n" + body + "\n")
            f.chmod(0o755)

    def _layout(self, parameters: Dict[str, Any]) -> None:
        """The deployed S3 layout: stub, parameters, profiles, and pkg/ with the real lifecycle code."""
        stub = self.prefix / "on_init_complete.sh"
        stub.write_text(f'#!/bin/bash\nexec bash "$(dirname "$0")/{SCRIPT}" "$@"\n')
        for group in ("controller", "login", "gpu-a", "cpu-b"):  # one OnInitComplete entry per instance group
            (self.prefix / f"on_init_complete.{group}.sh").write_text(
                f'#!/bin/bash\nexec bash "$(dirname "$0")/{SCRIPT}" --group {group} "$@"\n')
        (self.prefix / "fmcluster_parameters.json").write_text(json.dumps(parameters))
        (self.prefix / "profiles").mkdir()
        for group in ("gpu-a", "cpu-b"):
            (self.prefix / "profiles" / f"{group}.json").write_text(
                json.dumps({"schema": 1, "group": group, "orchestrator": "slurm"}))
        rt = self.prefix / "pkg/fmcluster/runtime"
        rt.mkdir(parents=True)
        for folder in [NODE_DIR, *(f for f in node_folders() if "storage" in f.parts)]:  # and the stores' entries
            shutil.copytree(folder, rt / archive_path(folder), ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(RUNTIME / "node_setup", rt / "node_setup", ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("__init__.py", "contract.py", "lustre.py", "mounts.py", "profile.py", "rooted.py", "stores.py",
                     "slurm_hooks.py",
                     "versions.py", "node_bootstrap.sh"):
            shutil.copy(RUNTIME / name, rt / name)
        (rt / "platforms/storage/fsx_lustre/node/lustre.py").write_text(FAKE_LUSTRE)  # the store's mount helper
        (rt / "validate.py").write_text(FAKE_VALIDATE)
        (rt / "observability").mkdir()
        (rt / "observability/install.sh").write_text(FAKE_INSTALL)
        for name in ("__init__.py", "slurm_job_map.py"):
            shutil.copy(RUNTIME / "observability" / name, rt / "observability" / name)

    def run(self, entry: str = "on_init_complete.sh", **env: str) -> subprocess.CompletedProcess:
        full = dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}", FAKE_LOG=str(self.logs),
                    FMCLUSTER_LIFECYCLE_ROOT=str(self.root), FMCLUSTER_NODE_IP=self.ip, FMCLUSTER_NVME_WAIT="0",
                    FMCLUSTER_RETRY_DELAY="0", FMCLUSTER_APT_LOCK_TIMEOUT="5")
        full.update(env)
        full.pop("PYTHONPATH", None)
        # as on a node, python3 caches the runtime's bytecode beside it (/opt/fmcluster/pkg): the script's later
        # starts then skip compiling it
        full.pop("PYTHONDONTWRITEBYTECODE", None)
        full.pop("SAGEMAKER_RESOURCE_CONFIG_PATH", None)
        return subprocess.run(["bash", str(self.prefix / entry)], cwd=self.prefix, env=full,
                              capture_output=True, text=True, timeout=120)

    def log(self, name: str) -> str:
        f = self.logs / name
        return f.read_text() if f.exists() else ""

    def marker(self, step: str) -> bool:
        return (self.root / "var/lib/fmcluster/lifecycle" / f"{step}.done").exists()


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout + r.stderr


def slurm_conf(n: Node, text: str) -> Path:
    conf = n.root / "opt/slurm/etc/slurm.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(text)
    scontrol = n.root / "opt/slurm/bin/scontrol"
    scontrol.parent.mkdir(parents=True, exist_ok=True)
    scontrol.write_text('#!/bin/bash\necho "$*" >> "$FAKE_LOG/scontrol.log"\n')
    scontrol.chmod(0o755)
    return conf


class Run:
    """A node and what its runs printed (a second run only where a test asks for it)."""

    def __init__(self, node: Node, *outs: str, conf: Optional[Path] = None, before: str = ""):
        self.node, self.outs, self.conf, self.before = node, outs, conf, before


@pytest.fixture(scope="module")
def controller(tmp_path_factory) -> Run:
    """The controller with the default parameters (job map off) and a slurm.conf of its own."""
    n = Node(tmp_path_factory.mktemp("controller"), ip=CONTROLLER_IP)
    conf = slurm_conf(n, "ClusterName=demo\n")
    return Run(n, ok(n.run()), conf=conf)


@pytest.fixture(scope="module")
def gpu_worker(tmp_path_factory) -> Run:
    """A GPU worker at level fast, policy drain, run twice (the second run must redo nothing)."""
    n = Node(tmp_path_factory.mktemp("gpu"), ip=GPU_IP, parameters=params(validation={"level": "fast", "policy": "drain"}))
    return Run(n, ok(n.run()), ok(n.run()))


@pytest.fixture(scope="module")
def cpu_worker(tmp_path_factory) -> Run:
    """A CPU worker whose slurm.conf lacks its partition."""
    n = Node(tmp_path_factory.mktemp("cpu"), ip=CPU_IP)
    conf = slurm_conf(n, "NodeName=ip-10-1-1-12\nPartitionName=gpu-a Nodes=ip-10-1-1-12\n")
    before = conf.read_text()
    return Run(n, ok(n.run()), conf=conf, before=before)


def test_controller_mounts_configures_and_installs_collectors_but_does_not_validate(controller):
    n, (out,) = controller.node, controller.outs
    assert "role=controller group=controller" in out
    assert n.log("lustre.log") == ("mount --dns-name fs-0abc.fsx.us-east-1.amazonaws.com --mount-name abcdefgh "
                                   "--mount-point /fsx --fstab\n"), "no EFA on the controller: LNet over TCP"
    assert "hold lustre-client-utils" in n.log("apt-mark.log")
    install = n.log("install.log")
    assert "--cluster demo --region us-east-1" in install and "--node-group controller" in install
    assert "--slurm-collector" in install and "--no-dcgm" in install and "--scrape-interval 30" in install
    assert n.log("validate.log") == ""
    assert "boot validator not run" in out
    daemon = json.loads((n.root / "etc/docker/daemon.json").read_text())
    assert daemon == {"data-root": "/opt/dlami/nvme/docker/data-root", "features": {"containerd-snapshotter": False}}
    assert "ENROOT_CACHE_PATH /opt/dlami/nvme/enroot/cache" in (n.root / "etc/enroot/enroot.conf").read_text()
    assert (n.root / "opt/dlami/nvme/enroot/cache").is_dir()
    assert "-u 2001 -g alice alice" in n.log("useradd.log") and "-aG docker alice" in n.log("usermod.log")
    assert "ssh-ed25519" in (n.root / "home/alice/.ssh/authorized_keys").read_text()
    for step in ("fsx", "containers", "users", "collectors", "slurm", "validate"):
        assert n.marker(step), step
    # the runtime is copied to a stable home; the log lands in /var/log/fmcluster
    assert (n.root / "opt/fmcluster/pkg/fmcluster/runtime/node_setup/cli.py").exists()
    assert (n.root / "opt/fmcluster/profiles/gpu-a.json").exists()
    assert "all steps done" in (n.root / "var/log/fmcluster/lifecycle.log").read_text()


def test_gpu_worker_runs_the_validator_with_its_group_profile_level_and_policy(gpu_worker):
    n, out = gpu_worker.node, gpu_worker.outs[0]
    assert "role=compute group=gpu-a partition=gpu-a gpu=1" in out
    validate = n.log("validate.log")
    assert f"--profile {n.root}/opt/fmcluster/profiles/gpu-a.json" in validate and "--level fast" in validate
    install = n.log("install.log")
    assert "--node-group gpu-a" in install and "--no-dcgm" not in install and "--slurm-collector" not in install
    assert "node validation passed" in (n.root / "var/log/fmcluster/bootstrap.log").read_text()


def test_a_gpu_worker_whose_mount_fails_leaves_the_verdict_to_the_validator_which_drains_it_once_slurmd_is_up(tmp_path):
    """One policy everywhere: the validator's required storage.mounts check applies validation.policy (here drain:
    the node boots, and a unit drains it once slurmd is up)."""
    n = Node(tmp_path, ip=GPU_IP)
    r = n.run(FAKE_LUSTRE_RC="1", FAKE_VALIDATE_RC="1")
    assert r.returncode == 0, r.stdout
    assert ("cannot mount FSx for Lustre fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh at /fsx (lustre helper "
            "failed; see the lines above); the boot validator reports it under policy drain") in r.stdout
    assert not n.marker("fsx"), "a rerun tries the mount again"
    assert "--profile" in n.log("validate.log")
    unit = (n.root / "etc/systemd/system/fmcluster-validate.service").read_text()
    assert "After=slurmd.service" in unit and "--policy drain" in unit and "profiles/gpu-a.json" in unit
    assert "enable fmcluster-validate.service" in n.log("systemctl.log")


def test_gpu_worker_that_fails_validation_under_fail_stops_provisioning(tmp_path):
    n = Node(tmp_path, ip=GPU_IP, parameters=params(validation={"level": "standard", "policy": "fail"}))
    r = n.run(FAKE_VALIDATE_RC="1")
    assert r.returncode == 1
    assert "fmcluster lifecycle FAILED at step validate: node validation failed under policy fail" in r.stdout
    assert not n.marker("validate")


def test_nodes_without_gpus_skip_the_validator_and_dcgm(cpu_worker):
    n = cpu_worker.node
    assert n.log("validate.log") == ""
    assert "--no-dcgm" in n.log("install.log") and "--slurm-collector" not in n.log("install.log")


def test_a_controller_whose_mount_fails_stops_under_policy_fail(tmp_path):
    n = Node(tmp_path, ip=CONTROLLER_IP, parameters=params(validation={"level": "standard", "policy": "fail"}))
    r = n.run(FAKE_LUSTRE_RC="1")
    assert r.returncode == 1
    assert ("fmcluster lifecycle FAILED at step fsx: cannot mount FSx for Lustre "
            "fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh at /fsx") in r.stdout
    assert not n.marker("fsx") and not n.marker("containers")
    assert n.log("install.log") == "" and n.log("useradd.log") == ""


def test_rerun_is_idempotent(gpu_worker):
    n, second = gpu_worker.node, gpu_worker.outs[1]
    assert second.count("skipping") == 8
    for log in ("lustre.log", "install.log", "validate.log", "useradd.log", "apt-mark.log"):
        assert len(n.log(log).splitlines()) == 1, log


def test_collector_failure_is_logged_not_fatal_and_retried_on_rerun(tmp_path):
    n = Node(tmp_path, ip=CPU_IP)
    out = ok(n.run(FAKE_INSTALL_RC="3"))
    assert "WARNING: collector install failed (exit 3)" in out
    assert not n.marker("collectors") and n.marker("slurm")
    ok(n.run())
    assert len(n.log("install.log").splitlines()) == 2 and n.marker("collectors")


def test_a_bare_controller_without_fsx_observability_users_or_nvme_skips_those_steps(tmp_path):
    """No FSx, no observability (so no GPU job map either), no users and no instance NVMe: one boot, each step
    skipped for its own reason."""
    n = Node(tmp_path, ip=CONTROLLER_IP, parameters=params(fsx=None, observability=None, users=[]), nvme=False)
    conf = slurm_conf(n, "ClusterName=demo\n")
    out = ok(n.run())
    assert "nothing to mount" in out and "no observability" in out and "no users" in out
    assert n.log("lustre.log") == n.log("install.log") == n.log("useradd.log") == ""
    assert conf.read_text() == "ClusterName=demo\n" and not (n.root / "opt/fmcluster/slurm").exists()
    assert "container data roots left unconfigured" in out and not (n.root / "etc/docker/daemon.json").exists()


def test_gpu_worker_without_nvme_fails_rather_than_filling_the_root_volume(tmp_path):
    n = Node(tmp_path, ip=GPU_IP, nvme=False)
    r = n.run()
    assert r.returncode == 1 and "FAILED at step containers: no instance NVMe" in r.stdout


def test_unknown_node_fails_at_the_role_step(tmp_path):
    n = Node(tmp_path, ip="192.168.77.7")
    r = n.run()
    assert r.returncode == 1
    assert "FAILED at step role: this node (192.168.77.7" in r.stdout and "not in resource_config.json" in r.stdout


def test_without_resource_config_the_group_entry_script_is_enough(tmp_path):
    """AWS documents no resource_config.json for OnInitComplete and its samples treat a missing one as normal: the
    per-group entry script names the group, and the node proceeds from it (other roles: tests/runtime/node_setup/)."""
    n = Node(tmp_path, ip=GPU_IP)
    (n.root / "opt/ml/config/resource_config.json").unlink()
    out = ok(n.run("on_init_complete.gpu-a.sh"))
    assert "no HyperPod resource config" in out and "instance group gpu-a from the entry script" in out
    assert f"role=compute group=gpu-a partition=gpu-a gpu=1 ip={GPU_IP}" in out
    assert f"--profile {n.root}/opt/fmcluster/profiles/gpu-a.json" in n.log("validate.log")


def test_a_resource_config_that_disagrees_with_the_entry_script_fails_at_the_role_step(tmp_path):
    n = Node(tmp_path, ip=GPU_IP)
    r = n.run("on_init_complete.cpu-b.sh")
    assert r.returncode == 1
    assert "FAILED at step role: resource_config.json puts this node in instance group 'gpu-a'" in r.stdout


def test_with_neither_resource_config_nor_a_group_the_role_step_says_so(tmp_path):
    n = Node(tmp_path, ip=GPU_IP)
    (n.root / "opt/ml/config/resource_config.json").unlink()
    r = n.run()
    assert r.returncode == 1
    assert "FAILED at step role: no HyperPod resource config at" in r.stdout and "no --group" in r.stdout


def test_held_apt_lock_past_the_deadline_fails_with_the_lock_named(tmp_path):
    n = Node(tmp_path, ip=CPU_IP)
    (n.root / "var/lib/dpkg").mkdir(parents=True)
    (n.root / "var/lib/dpkg/lock-frontend").touch()
    (n.logs / "locks-held").touch()
    r = n.run(FMCLUSTER_APT_LOCK_TIMEOUT="0")
    assert r.returncode == 1
    assert "FAILED at step apt-locks: /var/lib/dpkg/lock-frontend still held after 0s" in r.stdout


def test_existing_user_with_another_uid_fails_the_users_step(tmp_path):
    n = Node(tmp_path, ip=CPU_IP)
    r = n.run(FAKE_ID_UID="1500")
    assert r.returncode == 1
    assert "FAILED at step users: user alice exists with uid 1500, parameters say 2001" in r.stdout


def test_slurm_step_only_reads_slurm_conf_and_warns_on_a_missing_partition(cpu_worker):
    n, (out,) = cpu_worker.node, cpu_worker.outs
    assert "WARNING: partition cpu-b (from the parameters) is not in" in out
    assert cpu_worker.conf.read_text() == cpu_worker.before
    assert not [line for line in n.log("systemctl.log").splitlines() if "slurm" in line]


def with_job_map() -> Dict[str, Any]:
    p = params()
    p["observability"]["gpu_job_map"] = True
    return p


def test_the_controller_registers_the_gpu_job_map_hooks_and_reconfigures_slurm(tmp_path):
    n = Node(tmp_path, ip=CONTROLLER_IP, parameters=with_job_map())
    conf = slurm_conf(n, "ClusterName=demo\nPrologFlags=Alloc\nPartitionName=gpu-a Nodes=ip-10-1-1-11\n")
    ok(n.run())
    text = conf.read_text()
    assert text.startswith("ClusterName=demo\nPrologFlags=Alloc\nPartitionName=gpu-a Nodes=ip-10-1-1-11\n")
    assert text.endswith("Prolog=/opt/fmcluster/slurm/prolog.sh\nEpilog=/opt/fmcluster/slurm/epilog.sh\n")
    assert n.log("scontrol.log") == "reconfigure\n"
    assert os.access(n.root / "opt/fmcluster/slurm/prolog.sh", os.X_OK)


def test_a_prolog_hyperpod_sets_itself_is_kept(tmp_path):
    """The same boot's FSx mount fails: under policy drain the controller warns and continues without it."""
    n = Node(tmp_path, ip=CONTROLLER_IP, parameters=with_job_map())
    conf = slurm_conf(n, "Prolog=/opt/slurm/etc/prolog.sh\n")
    out = ok(n.run(FAKE_LUSTRE_RC="1"))
    assert "WARNING: cannot mount FSx for Lustre" in out and "this controller node continues without it" in out
    assert "sets Prolog already; left as it is" in out
    assert conf.read_text().splitlines()[0] == "Prolog=/opt/slurm/etc/prolog.sh"
    assert conf.read_text().splitlines()[-1] == "Epilog=/opt/fmcluster/slurm/epilog.sh"


def test_without_gpu_job_map_the_controller_writes_the_hooks_but_registers_nothing(controller):
    """Off by default: a node that booted before its runtime wrote the hooks would drain on its next job."""
    n, (out,) = controller.node, controller.outs
    assert "not registered in slurm.conf" in out and controller.conf.read_text() == "ClusterName=demo\n"
    assert os.access(n.root / "opt/fmcluster/slurm/prolog.sh", os.X_OK) and n.log("scontrol.log") == ""


def test_workers_write_the_hooks_first_and_leave_slurm_conf_alone(tmp_path):
    """The same boot mounts an EFA-enabled file system: the helper is asked for LNet over EFA."""
    p = with_job_map()
    p["fsx"] = {"dns_name": "fs-0abc.fsx.us-east-1.amazonaws.com", "mount_name": "abcdefgh", "mount_point": "/fsx",
                "efa": True}
    n = Node(tmp_path, ip=GPU_IP, parameters=p)
    conf = slurm_conf(n, "ClusterName=demo\n")
    out = ok(n.run())
    assert out.index("[job-map] end") < out.index("[fsx] start")
    assert os.access(n.root / "opt/fmcluster/slurm/epilog.sh", os.X_OK)
    assert conf.read_text() == "ClusterName=demo\n" and n.log("scontrol.log") == ""
    assert n.log("lustre.log").strip().endswith("--fstab --efa")


def test_listed_stores_are_mounted_after_fsx_and_a_failure_stops_the_controller_under_policy_fail(tmp_path):
    script = 'echo "s3 $*" >> "$FAKE_LOG/listed.log"\nexit "${FAKE_LISTED_RC:-0}"\n'
    mounts = [{"store": "mountpoint-s3", "path": "/s3", "script": script,
               "failure": "Mountpoint for Amazon S3 mount failed (s3://bucket/ on /s3)"}]
    n = Node(tmp_path, ip=CONTROLLER_IP, parameters=params(mounts=mounts,
                                                           validation={"level": "standard", "policy": "fail"}))
    out = ok(n.run())
    assert "mountpoint-s3 mounted at /s3" in out and n.marker("mounts")
    assert out.index("[containers] container data under /opt/dlami/nvme") < out.index("[mounts] mounting mountpoint-s3"), \
        "after the NVMe wait: a cache there must not land on the root volume"
    again = Node(tmp_path / "again", ip=CONTROLLER_IP, parameters=params(
        mounts=mounts, validation={"level": "standard", "policy": "fail"}))
    r = again.run(FAKE_LISTED_RC="2")
    assert r.returncode == 1
    assert ("FAILED at step mounts: Mountpoint for Amazon S3 mount failed (s3://bucket/ on /s3) (exit 2; see the "
            "lines above); policy fail") in r.stdout
    assert not again.marker("mounts") and again.marker("containers") and not again.marker("users")


def test_a_gpu_worker_leaves_a_failed_listed_mount_to_the_validator(tmp_path):
    mounts = [{"store": "mountpoint-s3", "path": "/s3", "script": "exit 1\n", "failure": "S3 mount failed"}]
    n = Node(tmp_path, ip=GPU_IP, parameters=params(mounts=mounts))
    out = ok(n.run())
    assert "S3 mount failed (exit 1; see the lines above); the boot validator reports it under policy" in out
    assert "--profile" in n.log("validate.log") and not n.marker("mounts")


def test_a_stores_entry_step_is_found_by_layout_and_run_under_its_key(tmp_path):
    """The scripts name no store: a store node folder's lifecycle.sh adds its key and its step, which runs after the
    job map and before containers with the same judge (a failure under policy fail stops the node at that step)."""
    n = Node(tmp_path, ip=CONTROLLER_IP, parameters=params(fsx=None, validation={"level": "standard", "policy": "fail"}))
    toy = n.prefix / "pkg/fmcluster/runtime/platforms/storage/toy/node/lifecycle.sh"
    toy.parent.mkdir(parents=True)
    toy.write_text('STORE_ENTRIES+=(toy)\nentry_step_toy() { mount_failed "$1" "$2" "toy would not mount ($3)"; }\n')
    r = n.run()
    assert r.returncode == 1, r.stdout
    assert "[fsx] start" in r.stdout and "no FSx for Lustre in the parameters" in r.stdout
    assert r.stdout.index("[job-map] end") < r.stdout.index("[toy] start")
    assert "FAILED at step toy: toy would not mount (slurm); policy fail" in r.stdout
    assert n.marker("fsx") and not n.marker("toy") and not n.marker("containers")


def test_a_store_entry_without_its_step_in_the_runtime_fails_the_node_rather_than_going_unmounted(tmp_path):
    n = Node(tmp_path, ip=CONTROLLER_IP, parameters=params())
    steps = list((n.prefix / "pkg/fmcluster/runtime/platforms/storage").glob("*/node/lifecycle.sh"))
    assert steps
    for step in steps:
        step.unlink()
    r = n.run()
    assert r.returncode == 1
    assert "FAILED at step role: no lifecycle step for the parameters' store entry fsx" in r.stdout
    assert not n.marker("role")

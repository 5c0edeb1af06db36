"""on_create_eks.sh (SageMaker HyperPod on EKS) end to end in a tmp dir: the deployed S3 layout with one entry stub
per instance group, fake system commands on PATH (systemctl, mount), the fake lustre helper and validator, and
FMCLUSTER_LIFECYCLE_ROOT standing in for the node's /. The real node_bootstrap.sh publishes the validator's result.

Each run costs a second of CPU, so tests that assert on the same run share it (module-scoped nodes), and the
decisions the script only relays are tested in-process in tests/runtime/node_setup/. No test depends on the wall
clock: where the script waits, a fake `sleep` changes what it waits for, and the deadline is far away."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from helpers.lifecycle import eks_params

from fmcluster.constructs.runtime_archive import archive_path, node_folders
from fmcluster.platforms.hyperpod.lifecycle_entry import NODE_DIR
from fmcluster.runtime import contract

REPO = Path(__file__).resolve().parents[3]
RUNTIME = REPO / "fmcluster" / "runtime"
# where the runtime archive puts this platform's node folder, below pkg/fmcluster/runtime
SCRIPT = f"pkg/fmcluster/runtime/{archive_path(NODE_DIR)}/on_create_eks.sh"

FAKE_COMMANDS = {
    # a unit is active when FAKE_ACTIVE names it; every call is logged
    "systemctl": ('echo "$*" >> "$FAKE_LOG/systemctl.log"; if [ "$1" = is-active ]; then '
                  'case " ${FAKE_ACTIVE:-} " in *" ${3:-} "*) exit 0;; esac; exit 1; fi; '
                  'if [ "$1" = cat ]; then case " ${FAKE_UNITS:-} " in *" ${2:-} "*) exit 0;; esac; exit 1; fi; exit 0'),
    "mount": 'echo "$*" >> "$FAKE_LOG/mount.log"',
    "nvidia-smi": 'echo "fake nvidia-smi must not be needed"; exit 1',
}

FAKE_LUSTRE = '''"""Fake lustre helper: records its argv, exits FAKE_LUSTRE_RC."""
import os, sys
with open(os.path.join(os.environ["FAKE_LOG"], "lustre.log"), "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
sys.exit(int(os.environ.get("FAKE_LUSTRE_RC", "0")))
'''

FAKE_VALIDATE = '''"""Fake validator: records its argv, prints a report, exits FAKE_VALIDATE_RC."""
import json, os, sys
with open(os.path.join(os.environ["FAKE_LOG"], "validate.log"), "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
rc = int(os.environ.get("FAKE_VALIDATE_RC", "0"))
print(json.dumps({"verdict": "pass" if rc == 0 else "fail", "failing": [] if rc == 0 else ["storage.mounts"]}))
sys.exit(rc)
'''


class Node:
    """One fake HyperPod EKS node of instance group `group`."""

    def __init__(self, tmp: Path, *, group: str, parameters: Optional[Dict[str, Any]] = None,
                 disks: tuple = ("/opt/dlami/nvme",)):
        self.group = group
        self.prefix, self.root, self.logs, self.bin = tmp / "s3", tmp / "root", tmp / "fake-logs", tmp / "bin"
        for d in (self.prefix, self.root, self.logs, self.bin):
            d.mkdir(parents=True, exist_ok=True)
        self._layout(parameters if parameters is not None else eks_params())
        (self.root / "proc").mkdir()
        (self.root / "proc/mounts").write_text("/dev/nvme0n1p1 / xfs rw 0 0\n" + "".join(
            f"/dev/md{i} {d} xfs rw 0 0\n" for i, d in enumerate(disks)))
        (self.root / "var/lib/containerd/io.containerd.content.v1.content").mkdir(parents=True)
        (self.root / "var/lib/containerd/io.containerd.content.v1.content/pause").write_text("preloaded image")
        for name, body in FAKE_COMMANDS.items():
            f = self.bin / name
            f.write_text("#!/bin/bash\n" + body + "\n")
            f.chmod(0o755)

    def _layout(self, parameters: Dict[str, Any]) -> None:
        groups = [w["instance_group_name"] for w in parameters["worker_groups"]] + [parameters["system_group"]]
        for g in groups:
            stub = self.prefix / contract.EKS_ENTRY_SCRIPT.format(group=g)
            stub.write_text(f'#!/bin/bash\nexec bash "$(dirname "$0")/{SCRIPT}" --group {g} "$@"\n')
        (self.prefix / "fmcluster_parameters.json").write_text(json.dumps(parameters))
        (self.prefix / "profiles").mkdir()
        for g in groups:
            (self.prefix / "profiles" / f"{g}.json").write_text(
                json.dumps({"schema": 1, "group": g, "orchestrator": "kubernetes"}))
        rt = self.prefix / "pkg/fmcluster/runtime"
        rt.mkdir(parents=True)
        for folder in [NODE_DIR, *(f for f in node_folders() if "storage" in f.parts)]:  # and the stores' entries
            shutil.copytree(folder, rt / archive_path(folder), ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(RUNTIME / "node_setup", rt / "node_setup", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(RUNTIME / "observability", rt / "observability", ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("__init__.py", "contract.py", "lustre.py", "mounts.py", "profile.py", "rooted.py", "stores.py",
                     "versions.py",
                     "node_bootstrap.sh"):
            shutil.copy(RUNTIME / name, rt / name)
        (rt / "platforms/storage/fsx_lustre/node/lustre.py").write_text(FAKE_LUSTRE)  # the store's mount helper
        (rt / "validate.py").write_text(FAKE_VALIDATE)

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        full = dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}", FAKE_LOG=str(self.logs),
                    FMCLUSTER_LIFECYCLE_ROOT=str(self.root), FMCLUSTER_NVME_WAIT="0", FMCLUSTER_RETRY_DELAY="0")
        full.update(env)
        full.pop("PYTHONPATH", None)
        # as on a node, python3 caches the runtime's bytecode beside it (/opt/fmcluster/pkg): the script's later
        # starts then skip compiling it
        full.pop("PYTHONDONTWRITEBYTECODE", None)
        stub = self.prefix / contract.EKS_ENTRY_SCRIPT.format(group=self.group)
        return subprocess.run(["bash", str(stub), *args], cwd=self.prefix, env=full, capture_output=True, text=True,
                              timeout=120)

    def log(self, name: str) -> str:
        f = self.logs / name
        return f.read_text() if f.exists() else ""

    def marker(self, step: str) -> bool:
        return (self.root / "var/lib/fmcluster/lifecycle" / f"{step}.done").exists()

    def published(self) -> Dict[str, Any]:
        return json.loads((self.root / "var/lib/fmcluster/validation.json").read_text())


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def gpu_node(tmp_path_factory) -> Dict[str, Any]:
    """An h100 node with its NVMe mounted, run twice: what the first run left (fstab), and both outputs."""
    n = Node(tmp_path_factory.mktemp("h100"), group="h100")
    first = ok(n.run())
    fstab = (n.root / "etc/fstab").read_text()
    return {"node": n, "first": first, "fstab": fstab, "second": ok(n.run())}


@pytest.fixture(scope="module")
def nvme_never_mounted(tmp_path_factory) -> Dict[str, Any]:
    """An h100 node (instance store expected) whose NVMe never mounts, under policy taint, with what an earlier image
    left on HyperPod's /opt/sagemaker volume."""
    n = Node(tmp_path_factory.mktemp("ebs"), group="h100", disks=("/opt/sagemaker",))
    for stale in ("opt/sagemaker/containerd/io.containerd.metadata.v1.bolt/meta.db", "opt/sagemaker/kubelet/pods/old"):
        (n.root / stale).parent.mkdir(parents=True, exist_ok=True)
        (n.root / stale).write_text("from the previous image")
    return {"node": n, "out": ok(n.run())}


@pytest.fixture(scope="module")
def troubled_node(tmp_path_factory) -> Dict[str, Any]:
    """An h100 node under policy taint whose FSx mount fails and whose validation fails."""
    n = Node(tmp_path_factory.mktemp("troubled"), group="h100")
    return {"node": n, "out": ok(n.run(FAKE_LUSTRE_RC="1", FAKE_VALIDATE_RC="1"))}


@pytest.fixture(scope="module")
def busy_node(tmp_path_factory) -> Dict[str, Any]:
    """An h100 node whose image has dlami-nvme.service and whose containerd and kubelet already run."""
    n = Node(tmp_path_factory.mktemp("busy"), group="h100")
    return {"node": n, "out": ok(n.run(FAKE_UNITS="dlami-nvme.service", FAKE_ACTIVE="kubelet containerd"))}


def test_gpu_node_moves_kubernetes_data_to_the_nvme_mounts_fsx_over_efa_and_validates(gpu_node):
    n, out = gpu_node["node"], gpu_node["first"]
    assert "role=worker group=h100 gpu=1 efa=1 policy=taint" in out
    root = n.root
    mounts = n.log("mount.log").splitlines()
    assert mounts == [f"--bind {root}/opt/dlami/nvme/{name} {root}{path}" for name, path in contract.KUBERNETES_DATA_DIRS]
    fstab = gpu_node["fstab"].splitlines()
    assert fstab == [f"/opt/dlami/nvme/{name} {path} none bind,x-systemd.requires-mounts-for=/opt/dlami/nvme 0 0"
                     for name, path in contract.KUBERNETES_DATA_DIRS]
    assert (root / "opt/dlami/nvme/containerd/io.containerd.content.v1.content/pause").read_text() == "preloaded image"
    assert n.log("lustre.log").strip() == ("mount --dns-name fs-0abc.fsx.us-east-1.amazonaws.com --mount-name abcdefgh "
                                           "--mount-point /fsx --fstab --efa")
    assert (root / "etc/systemd/system/fmcluster-efa-textfile.timer").exists()
    assert "enable --now fmcluster-efa-textfile.timer" in n.log("systemctl.log")
    validate = n.log("validate.log")
    assert f"--profile {root}/opt/fmcluster/profiles/h100.json" in validate and "--level standard" in validate
    bootstrap = (root / "var/log/fmcluster/bootstrap.log").read_text()
    assert "level=standard policy=report agent=kubelet" in bootstrap, "taint: the node reports, the node gate acts"
    assert n.published()["verdict"] == "pass"
    for step in ("containers", "fsx", "efa-textfile", "validate"):
        assert n.marker(step), step


def test_a_failed_validation_under_taint_is_published_for_the_gate_and_the_node_joins(troubled_node):
    n = troubled_node["node"]
    assert n.published()["verdict"] == "fail"
    assert not (n.root / "etc/systemd/system/fmcluster-validate.service").exists(), "no drain unit on Kubernetes"


def test_a_failed_validation_under_fail_fails_the_lifecycle_so_hyperpod_replaces_the_instance(tmp_path):
    n = Node(tmp_path, group="h100", parameters=eks_params(validation={"level": "standard", "policy": "fail"}))
    r = n.run(FAKE_VALIDATE_RC="1")
    assert r.returncode == 1
    assert "fmcluster lifecycle FAILED at step validate: node validation failed under policy fail" in r.stdout
    assert "policy=fail" in (n.root / "var/log/fmcluster/bootstrap.log").read_text() and not n.marker("validate")


def test_the_bind_mounts_wait_for_the_dlami_nvme_service_at_boot(busy_node):
    for line in (busy_node["node"].root / "etc/fstab").read_text().splitlines():
        assert line.endswith("bind,x-systemd.requires-mounts-for=/opt/dlami/nvme,x-systemd.after=dlami-nvme.service 0 0")


def test_a_gpu_type_with_instance_store_waits_for_the_nvme_mount_itself(tmp_path):
    """No dlami-nvme.service on the image (the HyperPod EKS AMI may mount the disks another way, or late): the node
    still waits for /opt/dlami/nvme, rather than settling at once for the /opt/sagemaker volume."""
    n = Node(tmp_path, group="h100", disks=("/opt/sagemaker",))
    # the disks are mounted while the script sleeps between two looks: a fake sleep mounts them (no wall clock)
    late = n.bin / "sleep"
    late.write_text(f"#!/bin/bash\necho '/dev/md9 /opt/dlami/nvme xfs rw 0 0' >> {n.root / 'proc/mounts'}\n")
    late.chmod(0o755)
    # a deadline no loaded machine reaches: the fake sleep, not the clock, ends the wait (the run's timeout bounds it)
    out = ok(n.run(FMCLUSTER_NVME_WAIT="86400", FMCLUSTER_NVME_POLL="5"))
    assert "waiting for the instance NVMe to be mounted at /opt/dlami/nvme (no dlami-nvme.service" in out
    assert f"--bind {n.root}/opt/dlami/nvme/kubelet {n.root}/var/lib/kubelet" in n.log("mount.log")
    assert "WARNING" not in out


def test_an_instance_store_that_never_mounts_is_said_loudly(nvme_never_mounted):
    n, out = nvme_never_mounted["node"], nvme_never_mounted["out"]
    missing = "ml.p5.48xlarge has instance-store NVMe, but /opt/dlami/nvme is not mounted after 0s"
    assert f"WARNING: {missing}: containerd, kubelet and pod data go to /opt/sagemaker instead" in out
    assert f"--bind {n.root}/opt/sagemaker/kubelet {n.root}/var/lib/kubelet" in n.log("mount.log")


def test_an_instance_store_that_never_mounts_fails_the_node_under_policy_fail(tmp_path):
    n = Node(tmp_path, group="h100", disks=("/opt/sagemaker",),
             parameters=eks_params(validation={"level": "standard", "policy": "fail"}))
    r = n.run()
    missing = "ml.p5.48xlarge has instance-store NVMe, but /opt/dlami/nvme is not mounted after 0s"
    assert r.returncode == 1 and f"FAILED at step containers: {missing}" in r.stdout
    assert n.log("mount.log") == "" and not n.marker("containers")


def test_a_type_without_instance_store_takes_the_hyperpod_volume_without_a_warning(tmp_path):
    params = eks_params()
    params["worker_groups"][0]["instance_store"] = False
    n = Node(tmp_path, group="h100", disks=("/opt/sagemaker",), parameters=params)
    out = ok(n.run(FMCLUSTER_NVME_WAIT="60"))
    assert "WARNING" not in out and "waiting" not in out, "nothing to wait for without the unit or an instance store"
    assert f"--bind {n.root}/opt/sagemaker/kubelet {n.root}/var/lib/kubelet" in n.log("mount.log")


def test_stale_containerd_and_kubelet_data_on_the_volume_are_removed_before_the_move(nvme_never_mounted):
    """/opt/sagemaker outlives the root volume across AMI updates: what the previous image's containerd and kubelet
    left there is removed before this image's data is copied, as AWS's HyperPod EKS sample does."""
    n, out = nvme_never_mounted["node"], nvme_never_mounted["out"]
    assert "containerd: removing stale /opt/sagemaker/containerd" in out and "kubelet: removing stale" in out
    assert not (n.root / "opt/sagemaker/containerd/io.containerd.metadata.v1.bolt").exists()
    assert not (n.root / "opt/sagemaker/kubelet/pods").exists()
    assert (n.root / "opt/sagemaker/containerd/io.containerd.content.v1.content/pause").read_text() == "preloaded image"


def test_a_directory_already_bind_mounted_this_boot_is_left_as_it_is(tmp_path):
    n = Node(tmp_path, group="h100")
    mounts = n.root / "proc/mounts"
    mounts.write_text(mounts.read_text() + "/dev/md0 /var/lib/kubelet xfs rw 0 0\n")
    (n.root / "opt/dlami/nvme/kubelet").mkdir(parents=True)
    (n.root / "opt/dlami/nvme/kubelet/live").write_text("this boot's pods")
    out = ok(n.run())
    assert "kubelet: /var/lib/kubelet is already a mount point" in out
    assert (n.root / "opt/dlami/nvme/kubelet/live").read_text() == "this boot's pods"
    assert f"{n.root}/var/lib/kubelet" not in n.log("mount.log")
    assert "/var/lib/kubelet none bind" in (n.root / "etc/fstab").read_text()


def test_no_possibly_empty_array_is_expanded_bare_under_set_u():
    """bash < 4.4 (Amazon Linux 2's 4.2) calls "${a[@]}" of an empty array an unbound variable under set -u; the
    script expands its optional arrays as ${a[@]+"${a[@]}"}."""
    text = (NODE_DIR / "on_create_eks.sh").read_text()
    bare = [m.group(0) for m in re.finditer(r'(?<!\+)"\$\{(\w+)\[@\]\}"', text)]
    assert not bare, bare


def test_running_containerd_and_kubelet_are_stopped_while_their_data_moves(busy_node):
    calls = busy_node["node"].log("systemctl.log").splitlines()
    assert calls.index("stop kubelet") < calls.index("stop containerd") < calls.index("start containerd") \
        < calls.index("start kubelet")


def test_a_gpu_node_without_the_nvme_or_the_hyperpod_volume_fails(tmp_path):
    """(The volume as the fallback: test_an_instance_store_that_never_mounts_is_said_loudly.)"""
    bare = Node(tmp_path, group="h100", disks=())
    r = bare.run()
    assert r.returncode == 1 and "FAILED at step containers: no instance NVMe" in r.stdout
    assert bare.log("mount.log") == ""


def test_the_system_node_mounts_fsx_over_tcp_runs_no_validator_and_goes_on_without_a_failed_mount(tmp_path):
    """The mount fails on this boot: no validator runs here, so the node applies the policy itself (taint, as
    report: the node goes on; fail: test_a_system_node_whose_mount_fails_under_policy_fail_fails)."""
    n = Node(tmp_path, group="system", disks=())
    r = n.run(FAKE_LUSTRE_RC="1")
    out = ok(r)
    assert "role=system group=system gpu=0" in out and "policy=taint" in out
    assert "stay on the root volume of this system node" in out and n.log("mount.log") == ""
    assert n.log("lustre.log").strip().endswith("--fstab"), "no EFA here: LNet over TCP"
    assert not n.marker("fsx"), "a rerun tries the mount again"
    assert n.log("validate.log") == "" and "boot validator not run" in out
    assert not (n.root / "etc/systemd/system/fmcluster-efa-textfile.timer").exists()


def test_a_system_node_whose_mount_fails_under_policy_fail_fails(tmp_path):
    n = Node(tmp_path, group="system", parameters=eks_params(validation={"level": "standard", "policy": "fail"}))
    r = n.run(FAKE_LUSTRE_RC="1")
    assert r.returncode == 1, r.stdout
    assert "FAILED at step fsx" in r.stdout
    assert not n.marker("fsx"), "a rerun tries the mount again"


def test_a_gpu_node_whose_mount_fails_leaves_the_verdict_to_the_validator(troubled_node):
    n, out = troubled_node["node"], troubled_node["out"]
    assert "the boot validator reports it under policy taint" in out and "--profile" in n.log("validate.log")
    assert not n.marker("fsx"), "a rerun tries the mount again"


def test_rerun_is_idempotent(gpu_node):
    n = gpu_node["node"]
    assert gpu_node["second"].count("skipping") == 5
    assert (n.root / "etc/fstab").read_text() == gpu_node["fstab"]
    assert len(n.log("validate.log").splitlines()) == 1 and len(n.log("mount.log").splitlines()) == 3


def test_unknown_group_fails_at_the_role_step_and_a_missing_group_is_a_usage_error(tmp_path):
    n = Node(tmp_path, group="h100", parameters=eks_params(worker_groups=[
        {"instance_group_name": "other", "instance_type": "ml.p5.48xlarge", "gpu": True, "efa": True}]))
    (n.prefix / "on_create.h100.sh").write_text(f'#!/bin/bash\nexec bash "$(dirname "$0")/{SCRIPT}" --group h100\n')
    r = n.run()
    assert r.returncode == 1 and "FAILED at step role: instance group 'h100' is neither" in r.stdout
    direct = subprocess.run(["bash", str(n.prefix / SCRIPT)], capture_output=True, text=True, timeout=60)
    assert direct.returncode == 2 and "usage" in direct.stderr


# Stores without an entry of their own come as a list of scripts (platforms/hyperpod/mounts.py): each records that it
# ran, in order, and exits as the test says.
def listed(store: str, path: str, rc: int = 0, body: str = "") -> Dict[str, str]:
    return {"store": store, "path": path, "failure": f"{store} mount failed ({path})",
            "script": f'{body}echo "{store} {path}" >> "$FAKE_LOG/listed.log"\nexit {rc}\n'}


def test_a_gpu_node_mounts_the_listed_stores_in_order_and_a_failed_one_is_left_to_the_validator(tmp_path):
    n = Node(tmp_path, group="h100", parameters=eks_params(mounts=[listed("broken", "/broken", rc=3),
                                                                    listed("mountpoint-s3", "/s3")]))
    out = ok(n.run())
    assert n.log("listed.log").splitlines() == ["broken /broken", "mountpoint-s3 /s3"], "a failure stops no later mount"
    assert ("broken mount failed (/broken) (exit 3; see the lines above); the boot validator reports it under "
            "policy taint") in out
    assert "mountpoint-s3 mounted at /s3" in out and "--profile" in n.log("validate.log")
    assert not n.marker("mounts"), "a rerun tries the mounts again"


def test_a_system_node_whose_listed_mount_fails_under_policy_fail_fails(tmp_path):
    n = Node(tmp_path, group="system", parameters=eks_params(
        mounts=[listed("mountpoint-s3", "/s3", rc=1)], validation={"level": "standard", "policy": "fail"}))
    r = n.run()
    assert r.returncode == 1, r.stdout
    assert "FAILED at step mounts: mountpoint-s3 mount failed (/s3) (exit 1; see the lines above); policy fail" in r.stdout
    assert not n.marker("mounts") and not n.marker("validate")


def test_a_listed_mount_that_never_answers_is_stopped_by_its_timeout(tmp_path):
    n = Node(tmp_path, group="system", parameters=eks_params(mounts=[listed("mountpoint-s3", "/s3", body="sleep 30\n")]))
    out = ok(n.run(FMCLUSTER_MOUNT_TIMEOUT="1"))
    assert ("WARNING: mountpoint-s3 mount failed (/s3): no answer after 1s; policy taint: this system node continues "
            "without it (pods mount it through its CSI driver)") in out
    assert n.log("listed.log") == ""


def test_a_listed_mount_script_cannot_read_the_list_on_its_stdin(tmp_path):
    n = Node(tmp_path, group="system", parameters=eks_params(mounts=[listed("first", "/a", body="cat >/dev/null\n"),
                                                                      listed("second", "/b")]))
    ok(n.run())
    assert n.log("listed.log").splitlines() == ["first /a", "second /b"]

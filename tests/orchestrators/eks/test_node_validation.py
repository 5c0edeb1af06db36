"""The boot validator passes on the EKS-optimized AL2023 NVIDIA AMI's own stack, with the profile EKS node groups
render, and still catches a broken node there.

The fixture is the p5 healthy node turned into what the AMI carries (amazon-eks-ami CHANGELOG, release v20260714, and
its al2023 provisioners; FixtureNode.eks_al2023 in tests/runtime/conftest.py): NVIDIA open kernel module 580.159.03
with its user-space libraries in /usr/lib64, the EFA kernel module and rdma-core only, no CUDA toolkit, containerd.
It follows the AMI's boot order: while user data runs (cloud-final.service) nodeadm has not yet assembled the
instance NVMe nor started kubelet; after nodeadm-run.service the RAID0 is on /mnt/k8s-disks/0 and kubelet runs, and the
boot-validation unit binds the instance NVMe tier's path (/opt/dlami/nvme) onto a directory of it before its validator. The
tests read from the synthesized user data when the validator runs. Synthesized, not captured: no public capture of
such a node exists.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import resources_of

from fmcluster.orchestrators.eks.node_groups import K8S_DISKS, NVME_ON_ARRAY, eks_node_profile
from fmcluster.platforms.storage.instance_nvme.tier import NVME
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parents[3]
EKS_DRIVER = "580.159.03"
_spec = importlib.util.spec_from_file_location("runtime_fixture_nodes", ROOT / "tests" / "runtime" / "conftest.py")
fixture_nodes = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(fixture_nodes)  # type: ignore[union-attr]
BOOT_ORDER = fixture_nodes.EKS_BOOT_ORDER
USER_DATA_UNIT = "cloud-final.service"  # cloud-init runs user data scripts in its final stage


def eks_al2023_node(tmp_path: Path, after: str):
    node = fixture_nodes.copy_node(tmp_path, "p5.48xlarge")
    node.eks_al2023(EKS_DRIVER, K8S_DISKS, after=after, bound_at=NVME.path)
    return node


def user_data_script(templates, stack: str, group: str) -> str:
    """The shell part of the group's launch-template user data, CloudFormation tokens as TOKEN."""
    template = templates[stack]
    (ng,) = [r["Properties"] for r in resources_of(template, "AWS::EKS::Nodegroup").values()
             if r["Properties"]["NodegroupName"] == group]
    data = template["Resources"][ng["LaunchTemplate"]["Id"]["Ref"]]["Properties"]["LaunchTemplateData"]
    text = "".join(p if isinstance(p, str) else "TOKEN" for p in data["UserData"]["Fn::Base64"]["Fn::Join"][1])
    return text.split('Content-Type: text/x-shellscript; charset="us-ascii"\n\n')[1].rsplit("\n--==FMCLUSTER==--", 1)[0]


def heredoc(script: str, delimiter: str) -> str:
    (body,) = re.findall(rf"<<'{delimiter}'\n(.*?\n){delimiter}\n", script, re.S)
    return body


def validator_runs_after(script: str) -> str:
    """The boot unit (BOOT_ORDER) after which the rendered user data's validator runs: in user data itself, or in the
    unit it hands the validation to (its latest ``After=`` among the boot units; started, never run inline)."""
    staged = re.findall(r"<<'FMCLUSTER_STAGE'\n(.*?\n)FMCLUSTER_STAGE\n", script, re.S)
    inline = re.sub(r"<<'FMCLUSTER_STAGE'\n.*?\nFMCLUSTER_STAGE\n", "", script, flags=re.S)
    if "node_bootstrap.sh" in inline:
        return USER_DATA_UNIT
    assert staged and "node_bootstrap.sh" in staged[0], "the validator runs nowhere"
    unit = heredoc(script, "FMCLUSTER_UNIT")
    (after,) = re.findall(r"^After=(.*)$", unit, re.M)
    (name,) = re.findall(r"systemctl start --no-block (\S+)", inline)
    assert re.search(rf">/etc/systemd/system/{re.escape(name)} <<'FMCLUSTER_UNIT'", inline)
    ordered = [u for u in after.split() if u in BOOT_ORDER]
    return max(ordered, key=BOOT_ORDER.index) if ordered else USER_DATA_UNIT


@pytest.fixture(scope="module")
def p5_profile():
    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    return eks_node_profile(spec, spec.node_groups[0])


def write_profile(node, profile) -> Path:
    path = node.base / "profile.json"
    path.write_text(profile.to_json())
    return path


def test_the_fixture_is_the_eks_ami_not_the_dlami(tmp_path):
    node = eks_al2023_node(tmp_path, after="nodeadm-run.service")
    assert EKS_DRIVER in (node.root / "sys/module/nvidia/version").read_text()
    assert not (node.root / "opt/amazon").exists() and not (node.bin / "fi_info").exists()
    # the DLAMI's profile refuses this node: its floors are the DLAMI bundle's (driver 595, CUDA, libfabric ...)
    res = node.run("--level", "standard", profile=node.profile(orchestrator="kubernetes"))
    assert res.rc == 1
    assert {"hw.driver.version", "acc.cuda", "efa.libfabric", "ofi.plugin"} <= set(res.not_passing())


def test_during_user_data_the_disks_are_not_assembled_and_kubelet_is_not_running(tmp_path, p5_profile):
    """Why the validator cannot run in user data on an NVMe node: nodeadm-run.service, which assembles the RAID0 and
    then starts kubelet, waits for cloud-final.service (amazon-eks-ami nodeadm-run.service: After=cloud-final.service)."""
    node = eks_al2023_node(tmp_path, after=USER_DATA_UNIT)
    res = node.run("--level", "standard", profile=write_profile(node, p5_profile))
    assert res.status("storage.instance_store") == "fail" and "not mounted" in res.check("storage.instance_store")["observed"]
    assert res.status("orch.agent") == "fail" and "kubelet inactive" in res.check("orch.agent")["observed"]
    after = eks_al2023_node(tmp_path / "after", after="nodeadm-run.service")
    res = after.run("--level", "standard", profile=write_profile(after, p5_profile))
    assert res.status("storage.instance_store") == "pass" and res.status("orch.agent") == "pass"


@pytest.mark.parametrize("example, stack, group", [("eks-p5", "eks-p5-cluster", "h100"),
                                                   ("eks-p6-b200-capacity-block", "eks-b200-cluster", "b200")])
def test_the_boot_validator_runs_after_nodeadm_has_mounted_the_disks(synth_example, example, stack, group):
    """The user data hands the validation to a unit ordered after nodeadm-run.service and starts it without waiting
    (a blocking start would wait for cloud-final.service, i.e. for the user data itself)."""
    script = user_data_script(synth_example(example), stack, group)
    assert validator_runs_after(script) == "nodeadm-run.service"
    stage = heredoc(script, "FMCLUSTER_STAGE")
    assert "set -e" not in stage, "a failed step must not keep the bootstrap (and its published verdict) from running"
    assert stage.index(f"mountpoint -q {K8S_DISKS}") < stage.index("bind-unit") < stage.index("lustre-client") \
        < stage.index("node_bootstrap.sh")
    assert "/etc/fmcluster/boot.env" in stage, "the level and policy the pointer named reach the bootstrap"
    assert "[Install]" not in heredoc(script, "FMCLUSTER_UNIT"), "once per instance, as user data"


@pytest.mark.parametrize("example, stack, group", [("eks-p5", "eks-p5-cluster", "h100"),
                                                   ("eks-p6-b200-capacity-block", "eks-b200-cluster", "b200")])
def test_the_user_data_puts_the_instance_nvme_at_the_tier_path_as_every_kind_has_it(synth_example, example, stack,
                                                                                     group):
    """A mount unit binds a directory of nodeadm's array on /opt/dlami/nvme once the array is mounted, and is enabled
    so later boots mount it after the array; a failure is said, and the validator's storage.instance_store judges it."""
    stage = heredoc(user_data_script(synth_example(example), stack, group), "FMCLUSTER_STAGE")
    (line,) = [x for x in stage.splitlines() if "bind-unit" in x]
    assert line.startswith("PYTHONPATH=/opt/fmcluster/pkg timeout 60 python3 -m fmcluster.runtime.node_setup bind-unit ")
    assert (f"--source {NVME_ON_ARRAY} --target /opt/dlami/nvme --requires {K8S_DISKS}" in line
            and NVME_ON_ARRAY == "/mnt/k8s-disks/0/nvme")
    assert "timeout 120 systemctl enable --now opt-dlami-nvme.mount ||" in line
    assert line.endswith("|| echo 'fmcluster: /opt/dlami/nvme not bound to the instance NVMe'")


def test_the_rendered_user_data_and_its_validation_script_are_shellcheck_clean(synth_example, tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    script = user_data_script(synth_example("eks-p5"), "eks-p5-cluster", "h100")
    for name, text in (("user-data.sh", script), ("boot-validation.sh", heredoc(script, "FMCLUSTER_STAGE"))):
        (tmp_path / name).write_text(text)
        assert subprocess.run(["bash", "-n", str(tmp_path / name)]).returncode == 0
        r = subprocess.run([shellcheck, str(tmp_path / name)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


@pytest.mark.parametrize("level", ["fast", "standard"])
def test_eks_profile_passes_on_the_eks_ami(tmp_path, synth_example, p5_profile, level):
    """On the node as it is when the rendered user data's validator runs."""
    after = validator_runs_after(user_data_script(synth_example("eks-p5"), "eks-p5-cluster", "h100"))
    node = eks_al2023_node(tmp_path, after=after)
    res = node.run("--level", level, "--skip", "orch.agent", profile=write_profile(node, p5_profile))
    assert res.rc == 0, json.dumps(res.not_passing())
    assert res.not_passing() == {}
    checks = {c["id"]: c for c in res.report["checks"]}
    assert checks["hw.driver.version"]["status"] == "pass" and EKS_DRIVER in checks["hw.driver.version"]["observed"]
    assert checks["storage.instance_store"]["status"] == "pass"
    assert f"{NVME.path} mounted (xfs /dev/md127)" in checks["storage.instance_store"]["observed"]
    assert checks["efa.devices"]["status"] == "pass" and checks["efa.devices"]["observed"] == 32
    for disabled in ("acc.cuda", "efa.libfabric", "ofi.plugin"):
        assert checks[disabled]["status"] == "skip"


def test_eks_profile_still_catches_a_broken_node(tmp_path, p5_profile):
    node = eks_al2023_node(tmp_path, after="nodeadm-run.service")
    node.remove("/proc/driver/nvidia/gpus/0000:ca:00.0")
    (node.root / "proc/mounts").write_text((node.root / "proc/mounts").read_text().replace(f" {NVME.path} ", " /mnt/x "))
    res = node.run("--level", "standard", "--skip", "orch.agent", profile=write_profile(node, p5_profile))
    assert res.rc == 1
    assert res.status("hw.gpu.driver") == "fail"
    assert res.status("storage.instance_store") == "fail"


def test_an_old_driver_fails_the_eks_floor(tmp_path, p5_profile):
    node = eks_al2023_node(tmp_path, after="nodeadm-run.service")
    for path in [node.root / "sys/module/nvidia/version", node.root / "proc/driver/nvidia/version"]:
        path.write_text(path.read_text().replace(EKS_DRIVER, "570.172.08"))
    res = node.run("--level", "fast", profile=write_profile(node, p5_profile))
    assert res.status("hw.driver.version") == "fail"

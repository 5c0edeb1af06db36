"""The boot validator passes on the EKS-optimized AL2023 NVIDIA AMI's own stack, with the profile EKS node groups
render, and still catches a broken node there.

The fixture is the p5 healthy node turned into what the AMI carries (amazon-eks-ami CHANGELOG, release v20260714, and
its al2023 provisioners; FixtureNode.eks_al2023 in tests/runtime/conftest.py): NVIDIA open kernel module 580.159.03
with its user-space libraries in /usr/lib64, the EFA kernel module and rdma-core only, no CUDA toolkit, containerd, and
nodeadm's RAID0 of the instance NVMe on /mnt/k8s-disks/0. Synthesized, not captured: no public capture of such a node
exists.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from fmcluster.orchestrators.eks.node_groups import K8S_DISKS, eks_node_profile
from fmcluster.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
EKS_DRIVER = "580.159.03"
_spec = importlib.util.spec_from_file_location("runtime_fixture_nodes", ROOT / "tests" / "runtime" / "conftest.py")
fixture_nodes = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(fixture_nodes)  # type: ignore[union-attr]


def eks_al2023_node(tmp_path: Path):
    node = fixture_nodes.copy_node(tmp_path, "p5.48xlarge")
    node.eks_al2023(EKS_DRIVER, K8S_DISKS)
    return node


@pytest.fixture(scope="module")
def p5_profile():
    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    return eks_node_profile(spec, spec.node_groups[0])


def write_profile(node, profile) -> Path:
    path = node.base / "profile.json"
    path.write_text(profile.to_json())
    return path


def test_the_fixture_is_the_eks_ami_not_the_dlami(tmp_path):
    node = eks_al2023_node(tmp_path)
    assert EKS_DRIVER in (node.root / "sys/module/nvidia/version").read_text()
    assert not (node.root / "opt/amazon").exists() and not (node.bin / "fi_info").exists()
    # the DLAMI's profile refuses this node: its floors are the DLAMI bundle's (driver 595, CUDA, libfabric ...)
    res = node.run("--level", "standard", profile=node.profile(orchestrator="kubernetes"))
    assert res.rc == 1
    assert {"hw.driver.version", "acc.cuda", "efa.libfabric", "ofi.plugin"} <= set(res.not_passing())


@pytest.mark.parametrize("level", ["fast", "standard"])
def test_eks_profile_passes_on_the_eks_ami(tmp_path, p5_profile, level):
    node = eks_al2023_node(tmp_path)
    res = node.run("--level", level, "--skip", "orch.agent", profile=write_profile(node, p5_profile))
    assert res.rc == 0, json.dumps(res.not_passing())
    assert res.not_passing() == {}
    checks = {c["id"]: c for c in res.report["checks"]}
    assert checks["hw.driver.version"]["status"] == "pass" and EKS_DRIVER in checks["hw.driver.version"]["observed"]
    assert checks["storage.instance_store"]["status"] == "pass"
    assert K8S_DISKS in checks["storage.instance_store"]["observed"]
    assert checks["efa.devices"]["status"] == "pass" and checks["efa.devices"]["observed"] == 32
    for disabled in ("acc.cuda", "efa.libfabric", "ofi.plugin"):
        assert checks[disabled]["status"] == "skip"


def test_eks_profile_still_catches_a_broken_node(tmp_path, p5_profile):
    node = eks_al2023_node(tmp_path)
    node.remove("/proc/driver/nvidia/gpus/0000:ca:00.0")
    (node.root / "proc/mounts").write_text((node.root / "proc/mounts").read_text().replace(f" {K8S_DISKS} ", " /mnt/x "))
    res = node.run("--level", "standard", "--skip", "orch.agent", profile=write_profile(node, p5_profile))
    assert res.rc == 1
    assert res.status("hw.gpu.driver") == "fail"
    assert res.status("storage.instance_store") == "fail"


def test_an_old_driver_fails_the_eks_floor(tmp_path, p5_profile):
    node = eks_al2023_node(tmp_path)
    for path in [node.root / "sys/module/nvidia/version", node.root / "proc/driver/nvidia/version"]:
        path.write_text(path.read_text().replace(EKS_DRIVER, "570.172.08"))
    res = node.run("--level", "fast", profile=write_profile(node, p5_profile))
    assert res.status("hw.driver.version") == "fail"

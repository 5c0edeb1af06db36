"""Each orchestrator kind's default AMI passes the kind's own boot validation.

For every kind and every GPU type its examples use (where a fixture node of the type exists), the NodeProfile comes from
the kind's own code path (the one its construct ships to the node), the fixture node carries the component versions of
the kind's default AMI, and the validator runs at the profile's level. No version check may fail: the floors are
compatibility floors, and an AMI AWS publishes for these types must clear them. Being behind the newest known-good
bundle is a warning, and the warning names the known-good version.

The versions, their sources and how far each is confirmed are in docs/validation.md ("Each orchestrator's default
AMI"). Release notes leave gaps: a component they do not publish is None here (removed from the fixture, so its check
skips or warns), and where a source only bounds a version the stack takes the low end, which the floors must clear
whatever the exact version is. Each stack's `unverified` says which values are not stated by a source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from fmcluster import registry
from fmcluster.platforms.storage.instance_nvme.tier import NVME
from fmcluster.registry import load_spec, parse_spec
from fmcluster.runtime import versions
from fmcluster.runtime.profile import NodeProfile
from fmcluster.spec import ClusterSpec, NodeGroup

from .conftest import REPO, TYPES, copy_node

# where nodeadm's localStorage RAID0 strategy mounts the instance NVMe's array (amazon-eks-ami setup-local-disks)
NODEADM_ARRAY = "/mnt/k8s-disks/0"

EXAMPLES = REPO / "examples"


@dataclass(frozen=True)
class Ami:
    """The versions a default AMI carries; None: not on the host (`absent`, as its source says) or not published
    (`unverified` says so)."""

    id: str
    name: str
    driver: str
    cuda: Optional[str]
    efa_installer: Optional[str]
    libfabric: Optional[str]
    aws_ofi_nccl: Optional[str]
    dcgm: Optional[str]
    gdrcopy: Optional[str]
    nccl: Optional[str]
    unverified: Tuple[str, ...] = ()
    absent: Tuple[str, ...] = ()

    def version(self, component: str) -> Optional[str]:
        return getattr(self, component)


# none, pcs: the Deep Learning Base OSS NVIDIA Driver GPU AMI (Ubuntu 22.04) the group's SSM parameter resolves to (pcs:
# an image built from it, README "PCS AMI"). Release 20260915, the known-good bundle (DLAMI release notes; the table
# read is the arm64 Ubuntu 22.04 page of that date: driver 595.91.07, CUDA 13.2, EFA 1.50.0, aws-ofi-nccl 1.21.1,
# DCGM 4.7.0, gdr_copy 2.5.2); libfabric 2.6.0amzn1.0 from the EFA release notes for installer 1.50.0.
DLAMI = Ami("dlami-20260915", "Deep Learning Base OSS NVIDIA Driver GPU AMI (Ubuntu 22.04) 20260915",
            driver="595.91.07", cuda="13.2", efa_installer="1.50.0", libfabric="2.6.0amzn1.0", aws_ofi_nccl="1.21.1",
            dcgm="4.7.0", gdrcopy="2.5.2", nccl=None,
            unverified=("x86_64 page not read: the arm64 Ubuntu 22.04 release of the same date stands in",
                        "nccl: not in the release notes' table (NCCL comes with the CUDA stack or the job)"))

# hyperpod-slurm: the SageMaker HyperPod AMI for Slurm, newest release read: 2026-01-25 (x86_64), "SageMaker HyperPod AMI
# releases for Slurm": NVIDIA driver 580.126.09; CUDA 12.6, 12.8, 12.9, 13.0 installed; its "EFA Installer version"
# field reads 2.3.1amzn2.0, a libfabric version. Not published: the /usr/local/cuda default (12.8 in the releases of
# 2025-05-27 and 2025-08-12 (arm64), the last that name one; 12.6 would fail the p6-b200 floor of 12.8, so this
# matters), the installer itself (libfabric 2.3.1 is newer than the 2.1.0amzn5.0 of installers 1.43.1 and 1.43.2, so
# >= 1.44.0), aws-ofi-nccl (>= 1.16.3, which 1.43.2 bundles), DCGM, GDRCopy and NCCL.
HYPERPOD = Ami("hyperpod-slurm-20260125", "SageMaker HyperPod AMI for Slurm 24.11, release 2026-01-25 (x86_64)",
               driver="580.126.09", cuda="12.8", efa_installer="1.44.0", libfabric="2.3.1amzn2.0",
               aws_ofi_nccl="1.16.3", dcgm=None, gdrcopy=None, nccl=None,
               unverified=("cuda: the default the 2025 releases name (12.6, 12.8, 12.9, 13.0 installed)",
                           "efa_installer, aws_ofi_nccl: lower bounds derived from libfabric 2.3.1amzn2.0",
                           "dcgm, gdrcopy, nccl: not published"))

# parallelcluster: the official ParallelCluster 3.16.1 AMI (ubuntu2204); 3.16.1 changed only Slurm (release notes). Two
# readings of its GPU stack, as the sources do not settle which 3.16.x moved the driver: the 3.16.0 changelog as merged
# in aws-parallelcluster pull request 7523 (driver, Fabric Manager and IMEX 580.173.02, CUDA 13.3.1, DCGM 4.6.0) and
# the 3.16.3 release notes, which upgrade the driver "from 595.71.05" and the EFA installer "from 1.49.0" (cookbook pull
# request 3249: driver 595.71.05, CUDA 13.2.2). Installer
# 1.49.0 bundles libfabric 2.4.0amzn5.0 (EFA release notes) and aws-ofi-nccl 1.20.0 (DLAMI Ubuntu 26.04 20260907 pairs
# the two). The cookbook installs no NCCL (recipe nvidia_install: driver, CUDA, GDRCopy, Fabric Manager, DCGM).
_PCLUSTER = dict(efa_installer="1.49.0", libfabric="2.4.0amzn5.0", aws_ofi_nccl="1.20.0", dcgm="4.6.0", gdrcopy=None,
                 nccl=None, absent=("nccl",))
PCLUSTER_3160 = Ami("pcluster-3.16.1-changelog", "ParallelCluster 3.16.1 official AMI, 3.16.0 changelog reading",
                    driver="580.173.02", cuda="13.3.1", **_PCLUSTER,
                    unverified=("efa_installer 1.49.0 (and its libfabric, aws-ofi-nccl): 3.16.3 upgrades from it; "
                                "that 3.16.1 already had it is not stated", "gdrcopy: not published"))
PCLUSTER_3163 = Ami("pcluster-3.16.1-3.16.3-notes", "ParallelCluster 3.16.1 official AMI, 3.16.3 release notes reading",
                    driver="595.71.05", cuda="13.2.2", **_PCLUSTER,
                    unverified=("driver, cuda: which 3.16.x first shipped 595.71.05 is not stated",
                                "efa_installer 1.49.0 in 3.16.1: not stated", "gdrcopy: not published"))

# eks: the EKS-optimized AL2023 NVIDIA AMI, release v20260714 (amazon-eks-ami CHANGELOG): kmod-nvidia-latest-dkms
# 580.159.03 for Kubernetes 1.30-1.36; the EFA kernel module and rdma-core only (aws-efa-installer --minimal); no CUDA
# toolkit, libfabric, aws-ofi-nccl, NCCL, DCGM or GDRCopy on the host (al2023 provisioners).
EKS = Ami("eks-al2023-nvidia-v20260714", "EKS-optimized AL2023 NVIDIA AMI, release v20260714",
          driver="580.159.03", cuda=None, efa_installer=None, libfabric=None, aws_ofi_nccl=None, dcgm=None,
          gdrcopy=None, nccl=None,
          absent=("cuda", "efa_installer", "libfabric", "aws_ofi_nccl", "dcgm", "gdrcopy", "nccl"))

# hyperpod-eks: the SageMaker HyperPod AMI for Amazon EKS (AL2023), AMI version 1.3.0, the newest listed ("Amazon
# SageMaker HyperPod AMI support policy", HyperPod EKS version list: 1.3.x, latest patch 1.3.0, first released
# 2026-06-29, built for Kubernetes 1.30-1.35 "with identical core component versions across the Kubernetes lines"):
# NVIDIA driver 580.167.08, CUDA Toolkit 12.8, EFA installer 1.47.0. Installer 1.47.0 bundles libfabric 2.4.0amzn1.0
# and aws-ofi-nccl (libnccl-ofi) 1.18.0 (EFA release notes); the policy names aws-ofi-nccl among the AMI's components
# but not its version. Not published for 1.x: DCGM, GDRCopy, NCCL (the 2025-10-22 AL2023 x86_64 release, before AMI
# versioning, listed DCGM 4.4.1 and gdr_copy 2.5.1). The release notes page ("SageMaker HyperPod AMI releases for
# Amazon EKS") as read stops at 2025-11-07 (driver 580.95.05, CUDA 13.0 for Kubernetes 1.28-1.33), so the support
# policy's table is the source for 1.3.0; it does not split x86_64 from arm64.
HYPERPOD_EKS = Ami("hyperpod-eks-1.3.0", "SageMaker HyperPod AMI for Amazon EKS, AMI version 1.3.0 (Kubernetes 1.33-1.35)",
                   driver="580.167.08", cuda="12.8", efa_installer="1.47.0", libfabric="2.4.0amzn1.0",
                   aws_ofi_nccl="1.18.0", dcgm=None, gdrcopy=None, nccl=None,
                   unverified=("x86_64: the support policy's table names no architecture",
                               "cuda: the policy names CUDA Toolkit 12.8; which toolkit /usr/local/cuda points to is "
                               "not stated",
                               "libfabric, aws_ofi_nccl: what installer 1.47.0 bundles (EFA release notes), not "
                               "stated for the AMI",
                               "dcgm, gdrcopy, nccl: not published for AMI versions 1.x"))

DEFAULT_AMIS: Dict[str, Tuple[Ami, ...]] = {
    "none": (DLAMI,),
    "pcs": (DLAMI,),
    "hyperpod-slurm": (HYPERPOD,),
    "parallelcluster": (PCLUSTER_3160, PCLUSTER_3163),
    "eks": (EKS,),
    "hyperpod-eks": (HYPERPOD_EKS,),
}
# GPU types no example of the kind uses but whose floors the AMI must clear too: p6-b200 (the Blackwell floors are the
# strictest) for ParallelCluster and HyperPod on EKS, checked on the kind's p5 example with its GPU group retyped
# (HyperPod's instance types carry the `ml.` prefix; the spec takes both, and the teams' quotas name the group, so the
# retyped spec stays valid).
EXTRA_TYPES = {"parallelcluster": ("parallelcluster-p5", "p6-b200.48xlarge"),
               "hyperpod-eks": ("hyperpod-eks-p5", "ml.p6-b200.48xlarge")}

# version check -> the component it judges
VERSION_CHECKS = {"hw.driver.version": "driver", "acc.cuda": "cuda", "efa.installer": "efa_installer",
                  "efa.libfabric": "libfabric", "ofi.plugin": "aws_ofi_nccl", "acc.dcgm": "dcgm",
                  "gdr.gdrcopy": "gdrcopy", "dist.nccl": "nccl"}
CROSS_CHECKS = ("dist.compat", "hw.smi.driver_match", "versions.pinned")


def kind_profile(spec: ClusterSpec, group: NodeGroup) -> str:
    """The profile JSON the kind's construct ships to the group's nodes."""
    return registry.kind_of(spec).node_profile_json(spec, group)


def retyped(example: str, instance_type: str) -> ClusterSpec:
    import yaml

    data = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())
    gpu = next(g for g in data["node_groups"] if g.get("role", "gpu") == "gpu")
    gpu["instance_type"] = instance_type
    return parse_spec(data)


def cases() -> List[object]:
    found = []
    specs = [(p.stem, load_spec(p)) for p in sorted(EXAMPLES.glob("*.yaml"))]
    for example, itype in EXTRA_TYPES.values():
        specs.append((f"{example}-as-{itype}", retyped(example, itype)))
    for example, spec in specs:
        kind = spec.orchestrator_kind.name
        for group in spec.node_groups:
            itype = group.instance_type.removeprefix("ml.")
            # a group on an AMI of its own is not on the default one; pcs groups always name theirs, built from the DLAMI
            custom = group.ami_id is not None and kind != "pcs"
            if itype not in TYPES or custom:
                continue
            for ami in DEFAULT_AMIS[kind]:
                found.append(pytest.param(spec, group.name, itype, ami, id=f"{kind}-{example}-{group.name}-{ami.id}"))
    return found


CASES = cases()


def test_every_kind_has_its_default_ami_and_a_case_on_hopper_and_blackwell():
    assert set(DEFAULT_AMIS) == {k.name for k in registry.BUILT_IN}
    covered: Dict[str, set] = {}
    for case in CASES:
        spec, _, itype, _ = case.values
        covered.setdefault(spec.orchestrator_kind.name, set()).add(itype)
    for kind in DEFAULT_AMIS:
        assert {"p5.48xlarge", "p6-b200.48xlarge"} <= covered.get(kind, set()), kind


def on_the_ami(tmp_path: Path, itype: str, ami: Ami, profile: NodeProfile):
    node = copy_node(tmp_path, itype)
    if ami is EKS:
        assert profile.instance_store == NVME.path  # bound onto nodeadm's RAID0 of the instance NVMe
        # the boot validation runs after nodeadm-run.service (node_groups.VALIDATE_AFTER), once the RAID0 is mounted,
        # and binds the tier's path onto it first
        node.eks_al2023(ami.driver, NODEADM_ARRAY, after="nodeadm-run.service", bound_at=NVME.path)
        return node
    assert ami.efa_installer and ami.libfabric and ami.aws_ofi_nccl
    node.set_stack(driver=ami.driver, cuda=ami.cuda, efa_installer=ami.efa_installer, libfabric=ami.libfabric,
                   aws_ofi_nccl=ami.aws_ofi_nccl, dcgm=ami.dcgm, nccl=ami.nccl, gdrcopy=ami.gdrcopy)
    return node


def expected(profile: NodeProfile, check: str, component: str, ami: Ami) -> str:
    """What the check must say: skip when the kind disables it or an optional component is absent; warn when behind
    the known-good bundle; else pass."""
    got = ami.version(component)
    if check in profile.disabled_checks:
        return "skip"
    if got is None:
        return "warn" if check == "dist.nccl" else "skip"  # dist.nccl: "jobs must bring NCCL", not required
    good = profile.known_good.get(component)
    return "warn" if good and not versions.at_least(got, good) else "pass"


@pytest.mark.parametrize("spec, group_name, itype, ami", CASES)
def test_the_default_ami_passes_the_kinds_own_validation(tmp_path, spec, group_name, itype, ami):
    group = next(g for g in spec.node_groups if g.name == group_name)
    profile_json = kind_profile(spec, group)
    profile = NodeProfile.from_json(profile_json)
    node = on_the_ami(tmp_path, itype, ami, profile)
    for m in profile.mounts:
        if m.get("source") == "mountpoint-s3":  # mounted by the boot lines, as the fixture has /fsx mounted
            access = "ro" if m.get("read_only") else "rw"
            node.append("/proc/mounts", f"mountpoint-s3 {m['path']} fuse {access},nosuid,nodev,noatime,user_id=0,"
                                        "group_id=0,default_permissions,allow_other 0 0\n")
            node.tool("stat", "echo fuseblk\n")
    path = tmp_path / "profile.json"
    path.write_text(profile_json)

    res = node.run("--level", profile.level, profile=path)

    assert res.rc == 0, (ami.name, res.failed())
    for check in (*VERSION_CHECKS, *CROSS_CHECKS):
        assert res.status(check) not in ("fail", "error"), (check, res.check(check))
    for check, component in VERSION_CHECKS.items():
        if check == "acc.dcgm" and profile.level == "fast":
            continue  # a standard-level check
        got = res.check(check)
        assert got["status"] == expected(profile, check, component, ami), (check, got)
        if got["status"] == "warn" and ami.version(component):
            good = profile.known_good[component]
            assert f"behind the known-good bundle's {good}" in got["detail"], (check, got)
    floors = {c: f for c, f in profile.min_versions.items() if f}
    for component, floor in floors.items():
        got = ami.version(component)
        assert got is None or versions.at_least(got, floor), (component, got, floor)


def test_every_gap_in_a_stack_is_explained():
    """A component a stack leaves out is either absent from the AMI (its source says so) or named as unverified."""
    for ami in {a for amis in DEFAULT_AMIS.values() for a in amis}:
        text = " ".join(ami.unverified)
        missing = [c for c in VERSION_CHECKS.values() if ami.version(c) is None]
        assert all(c in ami.absent or c in text for c in missing), (ami.id, missing)


def test_a_hyperpod_node_whose_cuda_default_were_12_6_would_fail_blackwell(tmp_path):
    """Why the HyperPod CUDA default matters: the release notes list 12.6 among the installed toolkits, and the validator
    judges the /usr/local/cuda default, so a node defaulting to 12.6 fails p6-b200's CUDA floor (12.8)."""
    spec = load_spec(EXAMPLES / "hyperpod-p6-b200-training-plan.yaml")
    group = next(g for g in spec.node_groups if g.instance_type.endswith("p6-b200.48xlarge"))
    profile_json = kind_profile(spec, group)
    node = on_the_ami(tmp_path, "p6-b200.48xlarge", HYPERPOD, NodeProfile.from_json(profile_json))
    node.write("/usr/local/cuda/version.json", '{"cuda": {"name": "CUDA SDK", "version": "12.6.3"}}\n')
    path = tmp_path / "profile.json"
    path.write_text(profile_json)
    res = node.run("--level", "fast", profile=path)
    assert res.status("acc.cuda") == "fail"
    assert "12.6.3 < minimum 12.8" in res.check("acc.cuda")["detail"]

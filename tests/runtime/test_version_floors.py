"""Minimum versions are compatibility floors per instance type (catalog.json min_versions, sources in
docs/validation.md); being behind the newest known-good bundle is a warning. A healthy node on a supported but
older AMI must pass, or every node one release behind would be drained."""

from __future__ import annotations

import pytest

# A p5.48xlarge stack as published in 2025 (DLAMI and EFA release notes of that year): driver 570.133.20,
# CUDA 12.8, EFA installer 1.43.2 with libfabric 2.1.0 and aws-ofi-nccl 1.16.3, DCGM 4.2.3.
STACK_2025 = dict(driver="570.133.20", cuda="12.8.1", efa_installer="1.43.2", libfabric="2.1.0amzn3.0",
                  aws_ofi_nccl="1.16.3", dcgm="4.2.3")
VERSION_CHECKS = ("hw.driver.version", "acc.cuda", "efa.installer", "efa.libfabric", "ofi.plugin", "acc.dcgm")


def test_a_p5_on_the_2025_stack_passes_with_warnings_not_failures(p5):
    p5.set_stack(**STACK_2025)
    res = p5.run("--level", "standard")
    assert res.rc == 0, res.failed()
    statuses = {c: res.status(c) for c in VERSION_CHECKS}
    assert set(statuses.values()) == {"warn"}, statuses
    assert "behind the known-good bundle's 595.91.07" in res.check("hw.driver.version")["detail"]


def test_the_eks_al2023_nvidia_driver_meets_every_gpu_types_floor(any_node):
    """EKS's AL2023 NVIDIA AMI ships driver 580.159.03 (amazon-eks-ami CHANGELOG, release v20260714)."""
    any_node.set_stack(**{**STACK_2025, "driver": "580.159.03", "cuda": "13.0.0"})
    res = any_node.run("--level", "fast")
    assert res.status("hw.driver.version") == "warn", res.check("hw.driver.version")


@pytest.mark.parametrize("itype, driver", [("p5.48xlarge", "520.61.05"), ("p6-b200.48xlarge", "565.57.01")])
def test_a_driver_below_the_types_floor_fails(make_node, itype, driver):
    node = make_node(itype)
    node.set_stack(**{**STACK_2025, "driver": driver})
    res = node.run("--level", "fast")
    assert res.status("hw.driver.version") == "fail"
    assert "< minimum" in res.check("hw.driver.version")["detail"]


def test_blackwell_floors_are_higher_than_hoppers():
    from fmcluster import catalog
    from fmcluster.runtime import versions

    hopper, blackwell = catalog.get("p5.48xlarge").min_versions, catalog.get("p6-b200.48xlarge").min_versions
    for component in ("driver", "cuda", "nccl", "aws_ofi_nccl"):
        assert versions.at_least(blackwell[component], hopper[component]), component
    assert catalog.get("p6-b200.48xlarge").min_versions["cuda"] == "12.8"  # native sm_100 (NVIDIA Blackwell guide)

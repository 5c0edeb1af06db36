"""What a node can hold: the EKS AMI's kube-reserved CPU ladder and the whole-node CPU request derived from it."""

from __future__ import annotations

import pytest

from fmcluster import catalog
from fmcluster.platforms.kubernetes import allocatable


@pytest.mark.parametrize("vcpus,reserved", [(1, 60), (2, 70), (4, 80), (8, 90), (96, 310), (192, 550)])
def test_kube_reserved_cpu_follows_the_eks_ami_ladder(vcpus, reserved):
    """6% of the first core, 1% of the second, 0.5% of the third and fourth, 0.25% of each core after."""
    assert allocatable.kube_reserved_cpu_millicores(vcpus) == reserved


def test_a_whole_node_pod_asks_for_less_than_the_node_has():
    p5 = catalog.get("p5.48xlarge")
    assert allocatable.whole_node_cpu_request(p5) == 189  # 192 - 0.55 - 2
    assert allocatable.whole_node_cpu_request(p5, threads_per_core=1) == 93  # 96 - 0.31 - 2
    node = allocatable.allocatable(p5, threads_per_core=1)
    assert node["cpu"] < 96 and node["nvidia.com/gpu"] == 8


def test_nodes_with_the_efa_driver_hold_its_hugepages_and_others_none():
    """EKS user guide: instances with the EFA driver installed pre-allocate 5128 2 MiB huge pages."""
    assert allocatable.allocatable(catalog.get("p5.48xlarge"))["hugepages-2Mi"] == 5128 * 2 * 2**20
    assert allocatable.allocatable(catalog.get("m5.xlarge"))["hugepages-2Mi"] == 0

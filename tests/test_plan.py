"""Plan figures follow from the catalog: compute, memory, NVLink domains, EFA, all-reduce bounds."""

from __future__ import annotations

import pytest

from fmcluster.plan import plan, ring_allreduce_seconds
from fmcluster.spec import parse_spec


def cluster(instance_type: str, count: int) -> dict:
    return plan(parse_spec({
        "name": "plan", "region": "us-east-1", "availability_zone": "us-east-1a",
        "node_groups": [{"name": "gpu", "instance_type": instance_type, "count": count}],
    }), gradient_gb=10)


def test_p5_aggregate_figures():
    g = cluster("p5.48xlarge", 4)["groups"][0]
    assert g["gpus"] == 32 and g["bf16_dense_pflops"] == pytest.approx(31.65, abs=0.01)
    assert g["hbm_tib"] == pytest.approx(32 * 80 / 1024, abs=0.01)
    assert g["nvlink_domains"] == 4 and g["nvlink_domain_gpus"] == 8
    assert g["efa_gbps_total"] == 4 * 3200 and g["nvme_tb"] == pytest.approx(121.6)


def test_ring_allreduce_bound():
    assert ring_allreduce_seconds(1e9, 1, 1e9) == 0
    assert ring_allreduce_seconds(8e9, 8, 450e9) == pytest.approx(2 * 7 / 8 * 8e9 / 450e9)


def test_nvlink_domain_is_faster_than_efa_and_gb200_domains_span_nodes():
    p5 = cluster("p5.48xlarge", 16)["groups"][0]
    # 450 GB/s one-way NVLink per GPU vs 400 GB/s of EFA per node
    assert p5["allreduce_ms_nvlink_domain"] < p5["allreduce_ms_across_efa"]
    gb200 = cluster("p6e-gb200.36xlarge", 18)["groups"][0]
    assert gb200["nvlink_domains"] == 1 and gb200["nvlink_domain_gpus"] == 72
    assert gb200["allreduce_ms_across_efa"] == 0
    assert "nvme_gb" in gb200["unverified"]


def test_single_node_has_no_efa_step():
    g = cluster("p5.48xlarge", 1)["groups"][0]
    assert g["allreduce_ms_across_efa"] == 0 and g["allreduce_ms_nvlink_domain"] > 0


def test_storage_throughput_is_capacity_times_the_tier():
    from fmcluster.plan import plan
    from fmcluster.spec import load_spec

    fsx = plan(load_spec("examples/pcs-p5en-capacity-block.yaml"))["storage"]["fsx"]
    assert fsx["capacity_tib"] == 37.5 and fsx["throughput_mbps_per_tib"] == 1000
    assert fsx["throughput_gbps"] == 37.5 and fsx["efa"] is True and fsx["associations"] == 2
    assert plan(load_spec("examples/existing-vpc.yaml"))["storage"] == {"fsx": None}

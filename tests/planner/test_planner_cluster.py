"""The cluster figures `fmcluster plan` has always printed follow from the catalog: compute, memory, NVLink
domains, EFA, all-reduce bounds, and the shared file system's throughput."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster.planner.cluster import cluster_figures, storage_figures
from fmcluster.registry import load_spec, parse_spec


def cluster(instance_type: str, count: int) -> dict:
    return cluster_figures(parse_spec({
        "name": "plan", "region": "us-east-1", "availability_zone": "us-east-1a",
        "node_groups": [{"name": "gpu", "instance_type": instance_type, "count": count}],
    }), gradient_gb=10)


def test_nvlink_domain_is_faster_than_efa_and_gb200_domains_span_nodes():
    p5 = cluster("p5.48xlarge", 16)["groups"][0]
    # 450 GB/s one-way NVLink per GPU vs 400 GB/s of EFA per node
    assert p5["allreduce_ms_nvlink_domain"] < p5["allreduce_ms_across_efa"]
    gb200 = cluster("p6e-gb200.36xlarge", 18)["groups"][0]
    assert gb200["nvlink_domains"] == 1 and gb200["nvlink_domain_gpus"] == 72


def test_single_node_has_no_efa_step():
    g = cluster("p5.48xlarge", 1)["groups"][0]
    assert g["allreduce_ms_across_efa"] == 0 and g["allreduce_ms_nvlink_domain"] > 0


def test_storage_throughput_is_capacity_times_the_tier():
    fsx = storage_figures(load_spec("examples/pcs-p5en-capacity-block.yaml"))["fsx"]
    assert fsx["capacity_tib"] == 37.5 and fsx["throughput_mbps_per_tib"] == 1000
    assert fsx["throughput_gbps"] == pytest.approx(37.5) and fsx["efa"] is True and fsx["associations"] == 2
    assert storage_figures(load_spec("examples/existing-vpc.yaml")) == {"fsx": None}


def test_plan_shows_each_association_at_the_path_nodes_see_and_in_the_bucket_it_links():
    from fmcluster.planner.text import cluster_lines

    s = load_spec("examples/default.yaml")
    c = cluster_figures(s, 14.0)
    dras = c["storage"]["fsx"]["data_repository_associations"]
    assert [(d["file_system_path"], d["node_path"]) for d in dras] == [
        ("/datasets", "/fsx/datasets"), ("/checkpoints", "/fsx/checkpoints")]
    text = "\n".join(cluster_lines(c))
    assert "/fsx/datasets <- s3://<fm-dev data bucket>/datasets/" in text
    assert "/fsx/checkpoints -> s3://<fm-dev data bucket>/checkpoints/" in text


def test_fsx_capacity_is_shown_as_the_spec_gives_it_in_gib_with_its_exact_tib():
    from fmcluster.planner.text import cluster_lines

    s = parse_spec({"name": "first", "region": "us-west-2", "availability_zone": "us-west-2a",
                    "node_groups": [{"name": "gpu", "instance_type": "p5en.48xlarge", "count": 16}],
                    "storage": {"fsx": {"storage_capacity_gib": 19200}}})
    text = "\n".join(cluster_lines(cluster_figures(s, 14.0)))
    assert "FSx for Lustre PERSISTENT_2 19200 GiB (18.75 TiB)" in text


def test_plan_and_diagram_show_no_placement_group_where_the_service_places_the_instances():
    for path in sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml")):
        s = load_spec(path)
        placements = [g["placement"] for g in cluster_figures(s, 14.0)["groups"]]
        if not s.orchestrator_kind.nodes.places_instances:
            assert set(placements) == {"none"}, path
        else:
            assert placements == [g.placement_strategy for g in s.node_groups], path

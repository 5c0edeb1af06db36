"""The catalog agrees with EC2's own DescribeInstanceTypes data (moto's bundled copy)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from fmcluster import catalog

REQUIRED_GPU_TYPES = [
    "p5.4xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6-b200.48xlarge", "p6-b300.48xlarge", "p6e-gb200.36xlarge",
]


@pytest.fixture(scope="module")
def ec2_data():
    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))


def test_every_required_gpu_type_is_present():
    assert set(REQUIRED_GPU_TYPES) <= set(catalog.gpu_types())
    assert {"m5.xlarge", "m5.2xlarge", "c5.4xlarge"} <= set(catalog.cpu_types())


def _gbps(performance: str) -> float:
    return float(re.search(r"([\d.]+) Gigabit", performance).group(1))


def test_catalog_matches_describe_instance_types(ec2_data):
    checked = 0
    for name, t in catalog.all_types().items():
        d = ec2_data.get(name)
        if d is None:
            assert name == "p6e-gb200.36xlarge", f"{name} not in moto's data: add it to the known gaps"
            continue
        checked += 1
        net = d["NetworkInfo"]
        assert t.vcpus == d["VCpuInfo"]["DefaultVCpus"], name
        assert t.memory_mib == d["MemoryInfo"]["SizeInMiB"], name
        assert t.network_cards == net["MaximumNetworkCards"], name
        assert t.efa_interfaces == net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0), name
        assert t.network_gbps == _gbps(net["NetworkPerformance"]), name
        assert (t.nvme_gb or 0) == d.get("InstanceStorageInfo", {}).get("TotalSizeInGB", 0), name
        gpus = d.get("GpuInfo", {}).get("Gpus", [])
        assert t.gpus == sum(g["Count"] for g in gpus), name
        if gpus:
            assert t.gpu == gpus[0]["Name"] and t.gpu_memory_mib == gpus[0]["MemoryInfo"]["SizeInMiB"], name
        # the cards we put EFA on are exactly the cards EC2 says accept efa-only
        efa_capable = [c["NetworkCardIndex"] for c in net.get("NetworkCards", []) if "efa-only" in c["InterfaceTypes"]]
        if t.efa_interfaces:
            assert list(t.efa_cards) == efa_capable, name
        arch = d["ProcessorInfo"]["SupportedArchitectures"]
        assert t.architecture in arch, name
    assert checked >= len(catalog.all_types()) - 1


def test_p6_b300_card_zero_is_ena_only(ec2_data):
    card0 = ec2_data["p6-b300.48xlarge"]["NetworkInfo"]["NetworkCards"][0]
    assert card0["InterfaceTypes"] == ["interface"]
    assert 0 not in catalog.get("p6-b300.48xlarge").efa_cards


def test_unknown_facts_are_marked_unverified_never_invented():
    gb200 = catalog.get("ml.p6e-gb200.36xlarge")
    assert gb200.nvme_gb is None and "nvme_gb" in gb200.unverified
    assert gb200.efa_cards == (1, 5, 9, 13)
    for t in catalog.all_types().values():
        assert {u.split(".")[0] for u in t.unverified} <= set(t.summary()) | {"vcpus"}, t.name  # min_versions.driver
        if t.is_gpu:
            assert t.sources, f"{t.name} has no sources"


def test_cli_catalog_json_has_the_documented_keys(capsys):
    from fmcluster.cli import main

    assert main(["catalog", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    keys = {"gpu", "gpus", "gpu_memory_mib", "vcpus", "memory_mib", "network_cards", "efa_interfaces", "nvme_gb",
            "network_gbps"}
    assert set(REQUIRED_GPU_TYPES) <= set(data)
    for entry in data.values():
        assert keys <= set(entry)
    assert data["p5.48xlarge"]["efa_interfaces"] == 32 and data["p5en.48xlarge"]["network_cards"] == 16

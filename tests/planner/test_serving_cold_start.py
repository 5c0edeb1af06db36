"""`plan --serve`'s cold start reads the weights from the shared file system at the read rate its store's section
gives (FSx for Lustre: capacity x the throughput per TiB the file system is built with), for a directory on it and
for a hub model staged there; from S3 otherwise."""

from __future__ import annotations

from typing import Any, Dict

import pytest
import yaml
from helpers import ROOT

from fmcluster.planner.serving.cli import _from_deployment
from fmcluster.planner.serving.plan import plan
from fmcluster.registry import parse_spec

EXAMPLE = ROOT / "examples" / "eks-p5en-serving.yaml"


def cold_start(fsx: Dict[str, Any], source: Dict[str, Any]) -> Dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["storage"]["fsx"] = fsx
    data["serving"]["models"][0]["source"] = source
    spec = parse_spec(data)
    return plan(_from_deployment(spec.serving.models[0], spec))["cold_start"]


def read_rate(cold: Dict[str, Any]) -> float:
    return cold["weights_gib"] * 2**30 / cold["read_s"]


@pytest.mark.parametrize("fsx,mb_per_tib", [
    ({"storage_capacity_gib": 4800, "throughput_per_tib": 500}, 500),
    # PERSISTENT_2 without a throughput is built at 250 MB/s per TiB (the planner once assumed 200)
    ({"storage_capacity_gib": 4800}, 250),
    ({"deployment_type": "SCRATCH_2", "storage_capacity_gib": 2400}, 200),  # SCRATCH_2's baseline
])
def test_a_model_on_the_file_system_is_read_at_its_built_throughput(fsx, mb_per_tib):
    cold = cold_start(fsx, {"fsx": "/models/llama"})
    assert cold["from"].startswith("the FSx for Lustre file system's throughput")
    assert read_rate(cold) == pytest.approx(mb_per_tib * 1e6 * fsx["storage_capacity_gib"] / 1024, rel=0.01)


def test_a_hub_model_is_read_from_the_file_system_it_is_staged_to_and_an_s3_model_from_s3():
    staged = cold_start({}, {"hub": "meta-llama/Llama-3.3-70B-Instruct", "revision": "0" * 40})
    assert staged["from"].startswith("the FSx for Lustre file system's throughput")
    assert cold_start({}, {"s3": "s3://my-models/llama/"})["from"].startswith("S3 at 100 Gb/s per node")

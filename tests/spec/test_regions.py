"""Regions exist or are refused, and an instance type with no known EC2 offering in the spec's Region is warned about:
both from the pinned packages' data, copied into fmcluster/spec/regions.json (scripts/region_data.py)."""

from __future__ import annotations

import importlib.util
import json
import sys

from helpers import ROOT

from fmcluster.cli import main
from fmcluster.registry import load_spec

sys.path.insert(0, str(ROOT / "scripts"))
region_data = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
    "region_data", ROOT / "scripts" / "region_data.py"))  # type: ignore[arg-type]
region_data.__spec__.loader.exec_module(region_data)  # type: ignore[union-attr]


def write(tmp_path, example: str, region: str):
    text = (ROOT / "examples" / example).read_text()
    spec = load_spec(ROOT / "examples" / example)
    text = text.replace(spec.availability_zone, f"{region}a").replace(f"region: {spec.region}", f"region: {region}")
    second = spec.network.new_vpc.second_availability_zone if spec.network.new_vpc else None
    if second:
        text = text.replace(second, f"{region}b")
    path = tmp_path / example
    path.write_text(text)
    return path


def test_the_committed_data_is_the_pinned_packages():
    committed = json.loads((ROOT / "fmcluster" / "spec" / "regions.json").read_text())
    assert region_data.same(committed, region_data.from_packages()), \
        "botocore or cfn-lint changed: run `python scripts/region_data.py` and commit fmcluster/spec/regions.json"


def test_a_region_aws_never_made_is_refused_with_what_exists(tmp_path, capsys):
    path = write(tmp_path, "default.yaml", "us-west-9")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "region: 'us-west-9' is not a Region of AWS's partition data (botocore " in err
    assert "us-east-1, us-east-2, us-west-1, us-west-2" in err and "Traceback" not in err


def test_a_type_with_no_known_offering_in_the_region_is_warned_about_naming_the_data(tmp_path, capsys):
    path = write(tmp_path, "eks-p5.yaml", "eu-west-1")  # p5 is not offered in eu-west-1 in cfn-lint's data
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    as_of = json.loads((ROOT / "fmcluster" / "spec" / "regions.json").read_text())["offerings"]["as_of"]
    assert ("warning: node_groups[0].instance_type: p5.48xlarge has no EC2 offering in eu-west-1 in the data (cfn-lint "
            in err) and f"read {as_of}" in err and "plan prices it at the us-east-1 rate" in err


def test_an_offered_type_and_a_service_run_kind_get_no_offering_warning(tmp_path, capsys):
    assert main(["validate", str(write(tmp_path, "eks-p5.yaml", "us-west-2"))]) == 0
    assert "no EC2 offering" not in capsys.readouterr().err
    # HyperPod runs its instances in the service's account: EC2's offerings say nothing about them
    assert main(["validate", str(write(tmp_path, "hyperpod-slurm-p5.yaml", "eu-west-1"))]) == 0
    assert "no EC2 offering" not in capsys.readouterr().err

"""The eks spec section and its rules: every bad input of the issue is refused naming its field, and `fmcluster
validate` exits 2 with that field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml

from fmcluster import registry
from fmcluster.cli import main
from fmcluster.platforms.kubernetes.settings import control_plane_zone
from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def base() -> Dict[str, Any]:
    """The EKS example with its GPU group made static (test_autoscaler.py covers the range)."""
    data = yaml.safe_load((ROOT / "examples" / "eks-p5.yaml").read_text())
    for group in data["node_groups"]:
        group.pop("min_count", None)
        group.pop("max_count", None)
    return data


def problems(data: Dict[str, Any]) -> str:
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    return "\n".join(e.value.problems)


def edit(base: Dict[str, Any], **eks: Any) -> Dict[str, Any]:
    data = copy.deepcopy(base)
    data["orchestrator"]["eks"].update(eks)
    return data


def test_the_kind_is_registered_with_its_facts(base):
    kind = registry.kind_named("eks")
    assert kind.nodes.agent == "kubernetes" and kind.nodes.capacity_types == {"on-demand", "odcr", "capacity-block"}
    spec = parse_spec(base)
    assert control_plane_zone(spec) == spec.second_availability_zone == "us-east-1b"
    assert [(e.role, e.instance_type, e.count) for e in kind.extra_instances(spec)] == [("system", "m6i.2xlarge", 2)]


@pytest.mark.parametrize("eks, path, words", [
    ({"kubernetes_version": "1.31"}, "orchestrator.eks.kubernetes_version", "outside the supported range 1.33-1.35"),
    ({"kubernetes_version": "1.36"}, "orchestrator.eks.kubernetes_version", "outside the supported range"),
    ({"kubernetes_version": "1.33", "efa_device": "dra"}, "orchestrator.eks.efa_device", "needs Kubernetes >= 1.34"),
    ({"scheduler": "slurm"}, "orchestrator.eks.scheduler", "not offered; choose kueue, volcano, kai"),
    ({"admins": ["arn:aws:sts::123456789012:assumed-role/admin/me"]}, "orchestrator.eks.admins",
     "not IAM role or user ARNs"),
    ({"admins": ["admin"]}, "orchestrator.eks.admins", "not IAM role or user ARNs"),
    ({"admins": []}, "orchestrator.eks.admins", "at least 1"),
    ({"endpoint": {"public": True}}, "orchestrator.eks.endpoint.public_access_cidrs", "needs the CIDRs"),
    ({"endpoint": {"public": True, "public_access_cidrs": ["0.0.0.0/0"]}},
     "orchestrator.eks.endpoint.public_access_cidrs", "opens the API to the internet"),
    ({"endpoint": {"public_access_cidrs": ["203.0.113.0/24"]}}, "orchestrator.eks.endpoint.public_access_cidrs",
     "public: true"),
    ({"control_plane_availability_zone": "us-east-1a"}, "orchestrator.eks.control_plane_availability_zone",
     "another AZ"),
    ({"control_plane_availability_zone": "us-west-2b"}, "orchestrator.eks.control_plane_availability_zone",
     "another AZ of us-east-1"),
    ({"control_plane_availability_zone": "us-east-1c"}, "orchestrator.eks.control_plane_availability_zone",
     "set network.new_vpc.second_availability_zone: us-east-1c and leave this out"),
    ({"efa_device": "both"}, "orchestrator.eks.efa_device", "plugin"),
    ({"system_nodes": {"instance_type": "p5.48xlarge"}}, "orchestrator.eks.system_nodes.instance_type", "CPU"),
])
def test_bad_eks_settings_name_the_field(base, eks, path, words):
    text = problems(edit(base, **eks))
    assert path in text and words in text, text


def test_capacity_block_with_more_than_one_subnet(base):
    data = copy.deepcopy(base)
    data["network"] = {"existing_vpc": {"vpc_id": "vpc-0123456789abcdef0",
                                        "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                                        "extra_subnet_ids": ["subnet-0123456789abcdef2"]}}
    data["node_groups"][0]["capacity"] = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
    text = problems(data)
    assert "network.existing_vpc.subnet_ids" in text and "exactly one subnet" in text, text
    data["network"]["existing_vpc"]["subnet_ids"] = ["subnet-0123456789abcdef0"]
    assert parse_spec(data).node_groups[0].capacity.type == "capacity-block"


def test_existing_vpc_needs_a_second_az_subnet(base):
    data = copy.deepcopy(base)
    data["network"] = {"existing_vpc": {"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["subnet-0123456789abcdef0"]}}
    assert "network.existing_vpc.extra_subnet_ids" in problems(data)


@pytest.mark.parametrize("change, path", [
    ({"validation": {"policy": "drain"}}, "validation.policy"),
    ({"validation": {"policy": "fail"}}, "validation.policy"),
    ({"validation": {"level": "deep"}}, "validation.level"),
    ({"network": {"new_vpc": {"cidr": "10.4.0.0/16", "nat_gateway": False}}}, "network.new_vpc.nat_gateway"),
])
def test_what_eks_nodes_cannot_honour(base, change, path):
    data = {**copy.deepcopy(base), **change}
    assert path in problems(data)


def test_node_group_rules(base):
    data = copy.deepcopy(base)
    data["node_groups"].append({"name": "system", "instance_type": "m5.xlarge", "count": 1, "role": "cpu",
                                "ami_id": "ami-0123456789abcdef0"})
    text = problems(data)
    assert "node_groups[1].name" in text and "node_groups[1].ami_id" in text
    data["node_groups"][0]["capacity"] = {"type": "training-plan",
                                          "training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/x"}
    assert "node_groups[0].capacity.type" in problems(data)


def test_policy_defaults_to_taint_on_eks(base):
    data = copy.deepcopy(base)
    data.pop("validation")
    spec = parse_spec(data)
    assert spec.validation.policy is None and spec.validation_policy == "taint"
    data["validation"] = {"policy": "report"}
    assert parse_spec(data).validation_policy == "report"


def test_the_default_version_is_the_platforms_default(base):
    from fmcluster.platforms.kubernetes.versions import DEFAULT_KUBERNETES_VERSION

    data = edit(base)
    data["orchestrator"]["eks"].pop("kubernetes_version")
    assert parse_spec(data).orchestrator.eks.kubernetes_version == DEFAULT_KUBERNETES_VERSION == "1.34"


def test_the_control_plane_takes_the_networks_second_az(base):
    data = edit(base)
    data["network"]["new_vpc"].pop("second_availability_zone")
    assert control_plane_zone(parse_spec(data)) == "us-east-1b"
    data["availability_zone"] = "us-east-1c"
    assert control_plane_zone(parse_spec(data)) == "us-east-1a"
    data["network"]["new_vpc"]["second_availability_zone"] = "us-east-1d"
    assert control_plane_zone(parse_spec(data)) == "us-east-1d"
    assert control_plane_zone(parse_spec(edit(data, control_plane_availability_zone="us-east-1d"))) == "us-east-1d"


def test_the_node_subnet_must_hold_every_nodes_pod_addresses(base):
    """200 x p5 under the VPC CNI: (1 + 24) x 200 addresses plus headroom outgrow the default /20."""
    data = copy.deepcopy(base)
    data["node_groups"][0]["count"] = 200
    text = problems(data)
    assert "network.new_vpc.node_subnet_prefix: the nodes need 6314 addresses" in text, text
    assert "24 pod addresses per node under eks" in text and "set node_subnet_prefix: 19" in text, text
    data["network"]["new_vpc"]["node_subnet_prefix"] = 19
    assert parse_spec(data).node_subnet_prefix == 19


def test_cli_validate_exits_2_naming_the_field(tmp_path, capsys, base):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(edit(base, kubernetes_version="1.29", efa_device="dra")))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "orchestrator.eks.kubernetes_version" in err and "Traceback" not in err

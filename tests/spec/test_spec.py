"""The spec accepts what infra teams write and names the field of every mistake."""

from __future__ import annotations

import copy
from typing import Any, Dict

import pytest
from helpers import ROOT

from fmcluster.registry import load_spec, parse_spec
from fmcluster.spec import SpecError, private_subnet_prefix

BASE: Dict[str, Any] = {
    "name": "fm-test",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}
CR = "cr-0123456789abcdef0"


def spec_with(**changes: Any) -> Dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def group_with(**changes: Any) -> Dict[str, Any]:
    g = dict(BASE["node_groups"][0])
    g.update(changes)
    return spec_with(node_groups=[g])


def problems(data: Any) -> list:
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    return e.value.problems


def test_minimal_spec_gets_secure_defaults():
    spec = parse_spec(BASE)
    g = spec.node_groups[0]
    assert spec.network.new_vpc is not None and spec.network.new_vpc.cidr == "10.0.0.0/16"
    assert g.efa_enabled and g.placement_strategy == "cluster" and g.capacity.type == "on-demand"
    assert spec.validation.policy is None and spec.validation_policy == "report" and spec.account is None


def test_hyperpod_prefix_is_normalized():
    assert parse_spec(group_with(instance_type="ml.p5en.48xlarge")).node_groups[0].instance_type == "p5en.48xlarge"


@pytest.mark.parametrize(
    "data, path, words",
    [
        (spec_with(name="Fm_Test"), "name", "DNS-safe"),
        (spec_with(region="mars-1"), "region", "region code"),
        (spec_with(availability_zone="us-west-2a"), "availability_zone", "not in region us-east-1"),
        (spec_with(account="1234"), "account", "12-digit"),
        (spec_with(colour="blue"), "colour", "unknown key; allowed keys: name, region"),
        (group_with(count=0), "node_groups[0].count", "greater than or equal to 1"),
        (group_with(count="two"), "node_groups[0].count", "is not a whole number"),
        (group_with(instance_type="p9.96xlarge"), "node_groups[0].instance_type", "allowed: GPU p5.48xlarge"),
        (group_with(instance_type="m5.xlarge"), "node_groups[0].instance_type", "role gpu needs a GPU"),
        (group_with(instance_type="m5.xlarge", role="cpu", efa=True), "node_groups[0].efa", "has no EFA"),
        (group_with(capacity={"type": "odcr"}), "node_groups[0].capacity.reservation_id", "required"),
        (group_with(capacity={"type": "odcr", "reservation_id": "cr-1"}), "node_groups[0].capacity.reservation_id",
         "malformed"),
        (group_with(capacity={"type": "capacity-block", "reservation_id": "res-0123456789abcdef0"}),
         "node_groups[0].capacity.reservation_id", "malformed"),
        (group_with(capacity={"type": "training-plan"}), "node_groups[0].capacity.training_plan_arn", "required"),
        (group_with(capacity={"type": "on-demand", "reservation_id": CR}), "node_groups[0].capacity.reservation_id",
         "not on-demand"),
        (group_with(capacity={"type": "capacity-block", "reservation_id": CR}, placement={"strategy": "cluster"}),
         "node_groups[0].placement.strategy", "Capacity Block cannot be combined"),
        (group_with(count=9, capacity={"type": "odcr", "reservation_id": CR, "size": 8}), "node_groups[0].count",
         "exceeds capacity.size 8"),
        (group_with(placement={"strategy": "cluster", "partitions": 3}), "node_groups[0].placement.partitions",
         "partition only"),
        (spec_with(node_groups=[]), "node_groups", "at least 1"),
        (spec_with(node_groups=[BASE["node_groups"][0], BASE["node_groups"][0]]), "node_groups[1].name",
         "used by another node group"),
        (spec_with(network={"new_vpc": {"cidr": "10.0.0.0/8"}}), "network.new_vpc.cidr", "/16 to /23"),
        (spec_with(network={"new_vpc": {"cidr": "8.8.0.0/16"}}), "network.new_vpc.cidr", "private"),
        (spec_with(network={"new_vpc": {"cidr": "10.0.0.0/23"}}, node_groups=[
            {"name": "gpu", "instance_type": "p5.48xlarge", "count": 200}]), "network.new_vpc.cidr", "larger CIDR"),
        (spec_with(node_groups=[{"name": f"gpu{i}", "instance_type": "p5.48xlarge", "count": 1700} for i in (1, 2)]),
         "network.new_vpc.node_subnet_prefix", "set node_subnet_prefix: 19 or shorter (a new size replaces"),
        (spec_with(network={"new_vpc": {"node_subnet_prefix": 16}}), "network.new_vpc.node_subnet_prefix",
         "does not fit in 10.0.0.0/16"),
        (spec_with(network={"new_vpc": {"node_subnet_prefix": 26}}), "network.new_vpc.node_subnet_prefix",
         "outside /16 to /24"),
        (spec_with(network={"new_vpc": {"second_availability_zone": "us-east-1a"}}),
         "network.new_vpc.second_availability_zone", "another AZ of us-east-1 than the GPU AZ"),
        (spec_with(network={"new_vpc": {}, "existing_vpc": {"vpc_id": "vpc-0123456789abcdef0",
                                                           "subnet_ids": ["subnet-0123456789abcdef0"]}}),
         "network.existing_vpc", "not both"),
        (spec_with(network={"existing_vpc": {"vpc_id": "vpc-1", "subnet_ids": ["subnet-0123456789abcdef0"]}}),
         "network.existing_vpc.vpc_id", "vpc- and"),
        (spec_with(network={"existing_vpc": {"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["sn-1"]}}),
         "network.existing_vpc.subnet_ids", "not subnet ids"),
        (spec_with(network={"existing_vpc": {"vpc_id": "vpc-0123456789abcdef0",
                                             "subnet_ids": ["subnet-0123456789abcdef0"],
                                             "subnet_cidrs": ["10.0.0.0/28"]}},
                   node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 16}]),
         "network.existing_vpc.subnet_cidrs", "usable addresses"),
        (spec_with(network={"flow_logs_retention_days": 42}), "network.flow_logs_retention_days", "allowed: 1, 3"),
        (spec_with(validation={"level": "slow"}), "validation.level", "'fast', 'standard' or 'deep'"),
        (spec_with(validation={"policy": "reboot"}), "validation.policy",
         "'fail', 'drain', 'taint', 'replace' or 'report'"),
        (spec_with(validation={"policy": "taint"}), "validation.policy", "taint does not apply to orchestrator none"),
        (spec_with(validation={"policy": "drain"}), "validation.policy", "no scheduler runs here to drain"),
        (spec_with(observability={"alert_emails": ["not-an-address"]}), "observability.alert_emails",
         "not e-mail"),
    ],
)
def test_bad_input_names_the_field(data, path, words):
    lines = problems(data)
    matching = [line for line in lines if line.startswith(f"{path}: ")]
    assert matching, f"no problem reported at {path}: {lines}"
    assert any(words in line for line in matching), lines


def test_several_problems_are_reported_together():
    data = spec_with(colour="blue", validation={"level": "slow"})
    assert {line.split(":")[0] for line in problems(data)} == {"colour", "validation.level"}


def test_training_plan_in_another_region_is_refused():
    arn = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/plan-a"
    lines = problems(group_with(capacity={"type": "training-plan", "training_plan_arn": arn}))
    assert "node_groups[0].capacity.training_plan_arn: the plan is in us-west-2, the cluster in us-east-1" in lines


@pytest.mark.parametrize("data", [None, [], "text", 3])
def test_top_level_must_be_a_mapping(data):
    assert problems(data)[0].startswith("(top level): ")


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "empty"),
        ("- a\n- b\n", "got a list"),
        ("name: [\n", "not valid YAML at line 2"),
        ("name: a\nname: b\n", "duplicate key 'name'"),
        ("\x00\x01", "not valid YAML"),
    ],
)
def test_files_that_are_not_specs(tmp_path, text, words):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(SpecError) as e:
        load_spec(f)
    assert words in e.value.problems[0]


def test_missing_file_and_directory(tmp_path):
    for path, words in ((tmp_path / "nope.yaml", "no such file"), (tmp_path, "is a directory")):
        with pytest.raises(SpecError) as e:
            load_spec(path)
        assert words in e.value.problems[0]


def test_capacity_block_defaults_to_no_placement_group():
    spec = parse_spec(group_with(capacity={"type": "capacity-block", "reservation_id": CR}))
    assert spec.node_groups[0].placement_strategy == "none"


def test_the_node_subnet_holds_the_ip_consuming_interfaces_plus_headroom():
    assert private_subnet_prefix(100) == 24
    assert private_subnet_prefix(300) == 23
    big = parse_spec(group_with(count=1000))
    assert big.node_ip_addresses == 1000  # efa-only interfaces take no IP: one per node
    assert 2 ** (32 - big.node_subnet_prefix) - 5 >= big.required_ips


@pytest.mark.parametrize("count", [1, 2, 4, 64, 1000])
def test_the_node_subnet_size_never_follows_the_node_count(count):
    """A new CIDR replaces the subnet and every node in it: the default is a function of the VPC alone."""
    assert parse_spec(group_with(count=count)).node_subnet_prefix == 20


@pytest.mark.parametrize("cidr, prefix", [("10.0.0.0/16", 20), ("10.0.0.0/19", 20), ("10.0.0.0/21", 22),
                                          ("10.0.0.0/23", 24)])
def test_the_default_node_subnet_is_a_20_or_half_a_smaller_vpc(cidr, prefix):
    assert parse_spec(spec_with(network={"new_vpc": {"cidr": cidr}})).node_subnet_prefix == prefix


def test_the_second_az_is_a_or_b_unless_named():
    assert parse_spec(spec_with()).second_availability_zone == "us-east-1b"
    named = spec_with(network={"new_vpc": {"second_availability_zone": "us-east-1d"}})
    assert parse_spec(named).second_availability_zone == "us-east-1d"


def test_every_example_is_valid(example_names):
    for name in example_names:
        load_spec(ROOT / "examples" / f"{name}.yaml")


@pytest.mark.parametrize(
    "validation, path, words",
    [
        ({"skip_checks": ["hw.nosuch"]}, "validation.skip_checks", "unknown checks hw.nosuch"),
        ({"min_versions": {"kernel": "6.8"}}, "validation.min_versions", "unknown components kernel"),
        ({"pinned_versions": {"nccl": "two"}}, "validation.pinned_versions", "not versions: nccl=two"),
    ],
)
def test_validation_skips_and_pins_name_what_is_allowed(validation, path, words):
    with pytest.raises(SpecError) as e:
        parse_spec({**BASE, "validation": validation})
    assert any(p.startswith(f"{path}:") and words in p for p in e.value.problems), e.value.problems


def test_validation_skips_and_pins_reach_the_node_profile():
    from fmcluster.profiles import node_profile

    spec = parse_spec({**BASE, "validation": {"skip_checks": ["hw.mig"], "min_versions": {"nccl": "2.27", "gdrcopy": None},
                                               "pinned_versions": {"aws_ofi_nccl": "1.21.1"}}})
    profile = node_profile(spec, spec.node_groups[0])
    assert profile.disabled_checks == ["hw.mig"] and profile.pinned_versions == {"aws_ofi_nccl": "1.21.1"}
    assert profile.min_versions["nccl"] == "2.27" and profile.min_versions["gdrcopy"] is None
    assert profile.min_versions["driver"] == "525.60.13"  # the type's floor stays

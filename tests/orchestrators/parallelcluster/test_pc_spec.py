"""Bad input for orchestrator parallelcluster: `fmcluster validate` exits 2 with the field path and what is
allowed; the rules are tested both ways (the nearest good spec passes)."""

from __future__ import annotations

from typing import Any, Dict

import pytest
import yaml
from helpers.parallelcluster import make_spec, spec_data

from fmcluster.cli import main
from fmcluster.orchestrators.parallelcluster.settings import (
    cluster_name,
    extra_instances,
    head_node_instance_type,
    min_count,
)
from fmcluster.spec import SpecError

CB = {"type": "capacity-block", "reservation_id": "cr-0a1b2c3d4e5f60718"}
ODCR = {"type": "odcr", "reservation_id": "cr-0a1b2c3d4e5f60718"}


def problems_of(data: Dict[str, Any], tmp_path, capsys) -> str:
    """Exit 2 through the CLI, one line per problem on stderr."""
    f = tmp_path / "spec.yaml"
    f.write_text(yaml.safe_dump(data))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def settings(**kw: Any) -> Dict[str, Any]:
    return {"type": "parallelcluster", "parallelcluster": kw}


def test_the_base_spec_is_valid_and_takes_the_defaults():
    spec = make_spec()
    assert cluster_name(spec) == "pc-test"
    assert head_node_instance_type(spec) == "m7i.2xlarge"
    assert [(e.role, e.instance_type) for e in extra_instances(spec)] == [("head-node", "m7i.2xlarge")]
    assert spec.orchestrator_kind.nodes.agent == "slurm"


@pytest.mark.parametrize("part", ["network", "storage", "observability", "cluster"])
def test_a_cluster_name_equal_to_a_stack_name_exits_2(tmp_path, capsys, part):
    err = problems_of(spec_data(orchestrator=settings(cluster_name=f"pc-test-{part}")), tmp_path, capsys)
    assert "orchestrator.parallelcluster.cluster_name" in err and f"pc-test-{part}" in err
    assert make_spec({"cluster_name": "pc-test-slurm"}).orchestrator.parallelcluster.cluster_name == "pc-test-slurm"


def test_a_cluster_name_parallelcluster_refuses_exits_2(tmp_path, capsys):
    err = problems_of(spec_data(orchestrator=settings(cluster_name="9lives")), tmp_path, capsys)
    assert "orchestrator.parallelcluster.cluster_name" in err


def test_a_head_node_subnet_without_a_nat_route_exits_2(tmp_path, capsys):
    err = problems_of(spec_data(network={"new_vpc": {"cidr": "10.0.0.0/16", "nat_gateway": False}}), tmp_path, capsys)
    assert "network.new_vpc.nat_gateway" in err and "nat_gateway: true" in err
    make_spec(network={"new_vpc": {"cidr": "10.0.0.0/16", "nat_gateway": True}})


def test_an_existing_vpc_without_route_tables_exits_2(tmp_path, capsys):
    vpc = {"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["subnet-0123456789abcdef0"]}
    err = problems_of(spec_data(network={"existing_vpc": vpc}), tmp_path, capsys)
    assert "network.existing_vpc.route_table_ids" in err
    make_spec(network={"existing_vpc": {**vpc, "route_table_ids": ["rtb-0123456789abcdef0"]}})


@pytest.mark.parametrize("os_name", ["rhel8", "rocky8", "rhel9"])
def test_p6e_gb200_on_an_os_parallelcluster_refuses_exits_2(tmp_path, capsys, os_name):
    extra = {"custom_ami": "ami-0123456789abcdef0"} if os_name.startswith("rocky") else {}
    data = spec_data(node_groups=[{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 18, "capacity": CB}],
                     orchestrator=settings(os=os_name, **extra))
    err = problems_of(data, tmp_path, capsys)
    assert "orchestrator.parallelcluster.os" in err and "alinux2023, ubuntu2204, ubuntu2404, rocky9" in err


@pytest.mark.parametrize("os_name", ["alinux2023", "ubuntu2204", "ubuntu2404"])
def test_p6e_gb200_on_a_supported_os_gets_an_arm64_head_node(os_name):
    spec = make_spec({"os": os_name}, node_groups=[
        {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 18, "capacity": CB}])
    assert head_node_instance_type(spec) == "m7g.2xlarge"


def test_a_head_node_of_another_architecture_exits_2(tmp_path, capsys):
    data = spec_data(node_groups=[{"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 18, "capacity": CB}],
                     orchestrator=settings(head_node_instance_type="m7i.2xlarge"))
    err = problems_of(data, tmp_path, capsys)
    assert "orchestrator.parallelcluster.head_node_instance_type" in err and "arm64" in err


def test_queues_of_two_architectures_exit_2(tmp_path, capsys):
    data = spec_data(node_groups=[
        {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2},
        {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 18, "capacity": CB}])
    err = problems_of(data, tmp_path, capsys)
    assert "node_groups: ParallelCluster runs one architecture per cluster" in err


def test_rocky_without_a_custom_ami_exits_2(tmp_path, capsys):
    err = problems_of(spec_data(orchestrator=settings(os="rocky9")), tmp_path, capsys)
    assert "orchestrator.parallelcluster.custom_ami" in err
    make_spec({"os": "rocky9", "custom_ami": "ami-0123456789abcdef0"})


def test_rhel8_without_a_custom_ami_exits_2(tmp_path, capsys):
    err = problems_of(spec_data(orchestrator=settings(os="rhel8")), tmp_path, capsys)
    assert "orchestrator.parallelcluster.os" in err and "python3" in err
    make_spec({"os": "rhel8", "custom_ami": "ami-0123456789abcdef0"})
    make_spec({"os": "rhel8"}, node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
                                              "ami_id": "ami-0123456789abcdef0"}])


@pytest.mark.parametrize("os_name", ["rhel8", "rhel9"])
@pytest.mark.parametrize("capacity", [CB, ODCR], ids=["capacity-block", "odcr"])
def test_rhel_on_a_reservation_exits_2_naming_the_platform_mismatch(tmp_path, capsys, os_name, capacity):
    """ParallelCluster's CapacityReservationValidator wants a Red Hat Enterprise Linux reservation for RHEL, and
    fmcluster's reservation preflight wants Linux/UNIX: no reservation passes both."""
    group = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": capacity,
             "ami_id": "ami-0123456789abcdef0"}
    err = problems_of(spec_data(orchestrator=settings(os=os_name, custom_ami="ami-0123456789abcdef0"),
                                node_groups=[group]), tmp_path, capsys)
    assert f"node_groups[0].capacity.type: {capacity['type']} with os {os_name} can never deploy" in err
    assert "Red Hat Enterprise Linux" in err and "alinux2023" in err
    # the nearest good specs: another OS on the reservation, RHEL on demand
    make_spec({"os": "rocky9", "custom_ami": "ami-0123456789abcdef0"}, node_groups=[group])
    make_spec({"os": os_name, "custom_ami": "ami-0123456789abcdef0"},
              node_groups=[{k: v for k, v in group.items() if k != "capacity"}])


def test_an_unknown_os_exits_2_naming_the_allowed(tmp_path, capsys):
    err = problems_of(spec_data(orchestrator=settings(os="centos7")), tmp_path, capsys)
    assert "orchestrator.parallelcluster.os" in err and "ubuntu2204" in err


def test_a_capacity_block_with_a_placement_group_exits_2(tmp_path, capsys):
    data = spec_data(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": CB,
                                   "placement": {"strategy": "cluster"}}])
    err = problems_of(data, tmp_path, capsys)
    assert "node_groups[0].placement.strategy" in err and "Capacity Block" in err
    make_spec(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": CB,
                            "placement": {"strategy": "none"}}])


def test_a_capacity_block_with_dynamic_nodes_exits_2(tmp_path, capsys):
    data = spec_data(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": CB}],
                     orchestrator=settings(queues={"gpu": {"min_count": 1}}))
    err = problems_of(data, tmp_path, capsys)
    assert "orchestrator.parallelcluster.queues.gpu.min_count" in err and "MinCount == MaxCount" in err


def test_on_demand_queues_may_have_dynamic_nodes():
    spec = make_spec({"queues": {"gpu": {"min_count": 0}}})
    assert min_count(spec, spec.node_groups[0]) == 0


def test_min_count_above_count_and_unknown_queues_exit_2(tmp_path, capsys):
    err = problems_of(spec_data(orchestrator=settings(queues={"gpu": {"min_count": 3}, "cpu": {"min_count": 0}})),
                      tmp_path, capsys)
    assert "orchestrator.parallelcluster.queues.gpu.min_count: 3 exceeds the group's count 2" in err
    assert "orchestrator.parallelcluster.queues.cpu: no node group named 'cpu'" in err


def test_an_efa_on_demand_queue_without_a_placement_group_exits_2(tmp_path, capsys):
    data = spec_data(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
                                   "placement": {"strategy": "none"}}])
    err = problems_of(data, tmp_path, capsys)
    assert "node_groups[0].placement.strategy" in err and "EFA queue" in err
    # the reservation decides placement: an ODCR may go without one, a Capacity Block always does
    make_spec(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": ODCR,
                            "placement": {"strategy": "none"}}])


def test_the_queue_setting_reservation_placement_group_moved_to_the_node_group(tmp_path, capsys):
    """The generic placement.existing_group replaces ParallelCluster's own setting."""
    data = spec_data(orchestrator=settings(queues={"gpu": {"reservation_placement_group": "odcr-pg"}}),
                     node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": ODCR}])
    err = problems_of(data, tmp_path, capsys)
    assert "orchestrator.parallelcluster.queues.gpu" in err and "placement: {existing_group: NAME}" in err
    spec = make_spec(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, "capacity": ODCR,
                                   "placement": {"existing_group": "odcr-pg"}}])
    assert spec.node_groups[0].existing_placement_group == "odcr-pg"


def test_an_efa_on_demand_queue_in_an_existing_placement_group_is_fine():
    make_spec(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
                            "placement": {"existing_group": "my-pg"}}])


def test_queue_names_parallelcluster_refuses_exit_2(tmp_path, capsys):
    long = "q" * 26
    err = problems_of(spec_data(node_groups=[{"name": long, "instance_type": "p5.48xlarge", "count": 2}]),
                      tmp_path, capsys)
    assert "node_groups[0].name" in err and "25 characters" in err
    err = problems_of(spec_data(node_groups=[{"name": "default", "instance_type": "p5.48xlarge", "count": 2}]),
                      tmp_path, capsys)
    assert "node_groups[0].name" in err


def test_an_efa_file_system_exits_2(tmp_path, capsys):
    err = problems_of(spec_data(storage={"fsx": {"storage_capacity_gib": 4800, "efa": True}}), tmp_path, capsys)
    assert "storage.fsx.efa" in err


def test_reserved_tags_and_taint_exit_2(tmp_path, capsys):
    err = problems_of(spec_data(tags={"parallelcluster:owner": "x"}, validation={"policy": "taint"}), tmp_path, capsys)
    assert "tags: parallelcluster:owner" in err and "validation.policy" in err


def test_drain_exits_2_naming_what_parallelcluster_allows(tmp_path, capsys):
    """Clustermgtd replaces drained static nodes, so drain would loop; fail and report remain."""
    err = problems_of(spec_data(validation={"policy": "drain"}), tmp_path, capsys)
    assert "validation.policy: drain does not apply to orchestrator parallelcluster" in err and "drain would loop" in err
    assert "use report or fail" in err
    for policy in ("fail", "report"):
        assert make_spec(validation={"policy": policy}).validation_policy == policy


def test_deep_validation_exits_2_naming_validation_level(tmp_path, capsys):
    """A deep run inside every static node's bootstrap does not fit CloudFormation's one-hour
    custom-resource wait."""
    err = problems_of(spec_data(validation={"level": "deep"}), tmp_path, capsys)
    assert "validation.level: deep does not fit ParallelCluster" in err and "3600" in err and "use standard" in err
    for level in ("fast", "standard"):
        make_spec(validation={"level": level})


def test_without_a_policy_parallelcluster_nodes_report_and_fail_on_the_official_ami_is_warned():
    """The official AMI's versions come from release notes, not an inspected AMI: under fail a misjudged check fails
    every node's bootstrap and rolls creation back, so the default is report and validate warns when fail is set on
    it (not with a custom AMI someone inspected)."""
    from fmcluster.orchestrators.parallelcluster.settings import spec_warnings

    assert make_spec().validation_policy == "report"
    assert not [w for w in spec_warnings(make_spec()) if w.path == "validation.policy"]
    (warned,) = [w for w in spec_warnings(make_spec(validation={"policy": "fail"})) if w.path == "validation.policy"]
    assert "official ParallelCluster AMI" in warned.message and "rolls back" in warned.message
    custom = make_spec({"custom_ami": "ami-0123456789abcdef0"}, validation={"policy": "fail"})
    assert not [w for w in spec_warnings(custom) if w.path == "validation.policy"]


def test_training_plans_are_not_parallelcluster_capacity(tmp_path, capsys):
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p"
    data = spec_data(node_groups=[{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2,
                                   "capacity": {"type": "training-plan", "training_plan_arn": arn}}])
    err = problems_of(data, tmp_path, capsys)
    assert "node_groups[0].capacity.type: orchestrator parallelcluster takes capacity-block, odcr, on-demand" in err


def test_settings_of_another_kind_are_refused():
    with pytest.raises(SpecError) as e:
        make_spec(orchestrator={"type": "parallelcluster", "pcs": {}})
    assert any("orchestrator" in p for p in e.value.problems)


def test_log_retention_must_be_one_parallelcluster_accepts(tmp_path, capsys):
    err = problems_of(spec_data(orchestrator=settings(log_retention_days=2)), tmp_path, capsys)
    assert "orchestrator.parallelcluster.log_retention_days" in err and "1827" in err

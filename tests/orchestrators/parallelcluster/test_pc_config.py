"""The rendered configuration, rule by rule and both ways: a Capacity Block never gets a placement group or
dynamic nodes; an EFA queue always gets one unless its reservation places the nodes; the rest of what the spec
says lands where ParallelCluster reads it."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from helpers.parallelcluster import make_spec
from helpers.storage import fsx_mounts

from fmcluster.orchestrators.parallelcluster.config import (
    HEAD_NODE_BOOTSTRAP_TIMEOUT_S,
    ClusterInputs,
    cluster_configuration,
    placement_group,
)
from fmcluster.platforms.storage import PARALLELCLUSTER
from fmcluster.platforms.storage.instance_nvme.tier import NVME

CB = {"type": "capacity-block", "reservation_id": "cr-0a1b2c3d4e5f60718"}
ODCR = {"type": "odcr", "reservation_id": "cr-0fedcba9876543210"}
INPUTS = ClusterInputs(subnet_id="subnet-0123456789abcdef0", security_group_id="sg-0123456789abcdef0",
                       head_node_policy_arn="arn:aws:iam::123456789012:policy/parallelcluster-h",
                       compute_policy_arn="arn:aws:iam::123456789012:policy/parallelcluster-c",
                       placement_groups={"gpu": "fm-gpu-pg"})


def render(settings: Any = None, inputs: ClusterInputs = INPUTS, **changes: Any) -> Dict[str, Any]:
    return cluster_configuration(make_spec(settings, **changes), inputs)


def queue(config: Dict[str, Any], index: int = 0) -> Dict[str, Any]:
    return config["Scheduling"]["SlurmQueues"][index]


def gpu(capacity: Dict[str, Any], **kw: Any) -> Dict[str, Any]:
    return {"name": "gpu", "instance_type": "p5.48xlarge", "count": 4, "capacity": capacity, **kw}


# --- Capacity Blocks ------------------------------------------------------------------------------------------


def test_a_capacity_block_queue_has_no_placement_group_and_only_static_nodes():
    q = queue(render(node_groups=[gpu(CB)]))
    assert q["CapacityType"] == "CAPACITY_BLOCK"
    assert q["Networking"]["PlacementGroup"] == {"Enabled": False}
    (cr,) = q["ComputeResources"]
    assert cr["MinCount"] == cr["MaxCount"] == 4
    assert cr["CapacityReservationTarget"] == {"CapacityReservationId": "cr-0a1b2c3d4e5f60718"}


def test_a_capacity_block_ignores_a_placement_group_it_is_handed():
    """Even a placement group in the inputs (a construct bug) never reaches a Capacity Block queue."""
    spec = make_spec(node_groups=[gpu(CB)])
    assert placement_group(spec, spec.node_groups[0], INPUTS) == {"Enabled": False}


def test_on_demand_queues_take_the_static_count_the_spec_gives():
    (cr,) = queue(render({"queues": {"gpu": {"min_count": 1}}}, node_groups=[gpu({"type": "on-demand"})]))["ComputeResources"]
    assert (cr["MinCount"], cr["MaxCount"]) == (1, 4)
    (cr,) = queue(render(node_groups=[gpu({"type": "on-demand"})]))["ComputeResources"]
    assert cr["MinCount"] == cr["MaxCount"] == 4


# --- EFA placement --------------------------------------------------------------------------------------------


def test_an_efa_queue_launches_into_fmclusters_placement_group():
    q = queue(render(node_groups=[gpu({"type": "on-demand"})]))
    assert q["Networking"]["PlacementGroup"] == {"Enabled": True, "Name": "fm-gpu-pg"}
    assert q["ComputeResources"][0]["Efa"] == {"Enabled": True, "GdrSupport": True}
    assert q["CapacityType"] == "ONDEMAND"


def test_an_odcr_made_in_a_placement_group_launches_into_that_one():
    """The node group's generic placement.existing_group."""
    q = queue(render(node_groups=[gpu(ODCR, placement={"existing_group": "odcr-pg"})]))
    assert q["Networking"]["PlacementGroup"] == {"Enabled": True, "Name": "odcr-pg"}
    assert q["CapacityType"] == "ONDEMAND"
    assert q["ComputeResources"][0]["CapacityReservationTarget"] == {"CapacityReservationId": "cr-0fedcba9876543210"}


@pytest.mark.parametrize("placement", [None, {"strategy": "none"}])
def test_any_other_odcr_gets_no_placement_group_even_if_handed_one(placement):
    """An open ODCR only fits worse in a new group (ParallelCluster warns about a reservation in an unrelated
    group): Enabled false, whatever the inputs say."""
    extra = {"placement": placement} if placement else {}
    q = queue(render(node_groups=[gpu(ODCR, **extra)]))
    assert q["Networking"]["PlacementGroup"] == {"Enabled": False}


def test_an_on_demand_group_may_launch_into_an_existing_group_too():
    q = queue(render(node_groups=[gpu({"type": "on-demand"}, placement={"existing_group": "my-pg"})]))
    assert q["Networking"]["PlacementGroup"] == {"Enabled": True, "Name": "my-pg"}


def test_every_efa_on_demand_queue_gets_a_placement_group():
    pg = queue(render(node_groups=[gpu({"type": "on-demand"})]))["Networking"]["PlacementGroup"]
    assert pg["Enabled"] is True and pg["Name"]


def test_a_queue_without_efa_or_placement_has_no_placement_section():
    inputs = ClusterInputs(**{**INPUTS.__dict__, "placement_groups": {}})
    q = queue(render(inputs=inputs, node_groups=[
        {"name": "cpu", "role": "cpu", "instance_type": "c5.18xlarge", "count": 2}]))
    assert "PlacementGroup" not in q["Networking"] and "Efa" not in q["ComputeResources"][0]
    assert "EphemeralVolume" not in q["ComputeSettings"]["LocalStorage"]


# --- the rest of the spec -------------------------------------------------------------------------------------


def test_head_node_is_private_secured_encrypted_and_reached_with_ssm():
    head = render()["HeadNode"]
    assert head["InstanceType"] == "m7i.2xlarge"
    assert head["Networking"] == {"SubnetId": "subnet-0123456789abcdef0", "SecurityGroups": ["sg-0123456789abcdef0"],
                                  "ElasticIp": False}
    assert head["LocalStorage"]["RootVolume"]["Encrypted"] is True
    assert head["Imds"] == {"Secured": True}
    assert head["Iam"] == {"AdditionalIamPolicies": [{"Policy": "arn:aws:iam::123456789012:policy/parallelcluster-h"}]}
    assert "Ssh" not in head
    assert render({"ssh_key_name": "ops"})["HeadNode"]["Ssh"] == {"KeyName": "ops"}


def test_nodes_replace_parallelclusters_security_groups_with_the_node_group_and_imdsv2_only():
    config = render()
    assert config["Imds"] == {"ImdsSupport": "v2.0"}
    assert queue(config)["Networking"]["SecurityGroups"] == ["sg-0123456789abcdef0"]
    assert "AdditionalSecurityGroups" not in queue(config)["Networking"]


def test_instance_nvme_is_local_storage_at_the_tiers_path():
    storage = queue(render())["ComputeSettings"]["LocalStorage"]
    assert storage["EphemeralVolume"] == {"MountDir": "/opt/dlami/nvme"} == {"MountDir": NVME.path}
    assert storage["RootVolume"] == {"Size": 200, "Encrypted": True, "VolumeType": "gp3"}


def test_official_ami_by_default_custom_ami_where_given():
    config = render()
    assert config["Image"] == {"Os": "ubuntu2204"} and "Image" not in queue(config)
    config = render({"os": "alinux2023", "custom_ami": "ami-0123456789abcdef0"},
                    node_groups=[gpu({"type": "on-demand"}, ami_id="ami-0fedcba9876543210")])
    assert config["Image"] == {"Os": "alinux2023", "CustomAmi": "ami-0123456789abcdef0"}
    assert queue(config)["Image"] == {"CustomAmi": "ami-0fedcba9876543210"}


def test_the_shared_file_system_is_mounted_by_id_from_the_stores_shared_storage_entry():
    (fsx,) = fsx_mounts(file_system_id="fs-0123456789abcdef0", mount_point="/fsx")
    inputs = ClusterInputs(**{**INPUTS.__dict__, "shared_storage": [fsx.services[PARALLELCLUSTER]]})
    assert render(inputs=inputs)["SharedStorage"] == [{"MountDir": "/fsx", "Name": "fsx", "StorageType": "FsxLustre",
                                                       "FsxLustreSettings": {"FileSystemId": "fs-0123456789abcdef0"}}]
    assert "SharedStorage" not in render()


def test_one_queue_per_node_group_named_after_it():
    config = render(node_groups=[gpu({"type": "on-demand"}),
                                 {"name": "prep", "role": "cpu", "instance_type": "c5.18xlarge", "count": 2}])
    assert [q["Name"] for q in config["Scheduling"]["SlurmQueues"]] == ["gpu", "prep"]
    assert [q["ComputeResources"][0]["Name"] for q in config["Scheduling"]["SlurmQueues"]] == ["p5-48xlarge", "c5-18xlarge"]
    assert config["Scheduling"]["SlurmSettings"] == {"ScaledownIdletime": 10, "QueueUpdateStrategy": "DRAIN"}


def test_the_head_node_waits_for_a_whole_compute_bootstrap_inside_the_providers_hour():
    """The compute nodes keep ParallelCluster's default bootstrap timeout (Slurm's ResumeTimeout, 2,100 s, which the
    OnNodeConfigured budget is cut to); the head node's wait, which holds theirs, is raised to fit one whole compute
    bootstrap after its own, and still ends before CloudFormation's one-hour custom-resource wait."""
    resume_timeout, head_bootstrap, provider_wait = 2100, 15 * 60, 3600
    for level in ("fast", "standard"):
        timeouts = render(validation={"level": level})["DevSettings"]["Timeouts"]
        assert timeouts == {"HeadNodeBootstrapTimeout": HEAD_NODE_BOOTSTRAP_TIMEOUT_S}
        assert resume_timeout + head_bootstrap <= HEAD_NODE_BOOTSTRAP_TIMEOUT_S < provider_wait - 5 * 60

def test_logs_are_retained_and_tags_are_listed():
    inputs = ClusterInputs(**{**INPUTS.__dict__, "tags": {"team": "ml", "fmcluster:cluster": "pc-test"}})
    config = render({"log_retention_days": 30}, inputs=inputs)
    assert config["Monitoring"]["Logs"]["CloudWatch"] == {"Enabled": True, "RetentionInDays": 30, "DeletionPolicy": "Retain"}
    assert config["Tags"] == [{"Key": "fmcluster:cluster", "Value": "pc-test"}, {"Key": "team", "Value": "ml"}]

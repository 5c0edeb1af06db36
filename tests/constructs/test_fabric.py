"""The EFA fabric: exact interface layout for every catalog GPU type, IMDSv2, encrypted
root volumes, placement and capacity targeting, the DLAMI resolved at deploy time."""

from __future__ import annotations

import json
import re

import pytest
from helpers import boot_pointers, resources_of

# (card, device, type) per type, written out from the EC2 user guide's layouts (docs/instances.md),
# not computed by the code under test.
P5_32 = [(0, 0, "interface"), (0, 1, "efa-only")] + [(c, 0, "efa-only") for c in range(1, 32)]
EXPECTED_LAYOUT = {
    "p5-small": [(0, 0, "interface"), (0, 1, "efa-only")],
    "p5": P5_32,
    "p5e": P5_32,
    "p5en": [(0, 0, "interface"), (0, 1, "efa-only")] + [(c, 0, "efa-only") for c in range(1, 16)],
    "b200": [(0, 0, "interface"), (0, 1, "efa-only")] + [(c, 0, "efa-only") for c in range(1, 8)],
    "b200-odcr": [(0, 0, "interface"), (0, 1, "efa-only")] + [(c, 0, "efa-only") for c in range(1, 8)],
    "b300": [(0, 0, "interface")] + [(c, 0, "efa-only") for c in range(1, 17)],  # card 0 is ENA only
    "gb200": [(0, 0, "interface")] + [(c, 0, "efa-only") for c in (1, 5, 9, 13)],
}


@pytest.fixture(scope="module")
def matrix(synth_example, tmp_path_factory):
    """The fabric-matrix example plus the types it cannot hold (not offered in us-east-1):
    one cluster stack template with every layout."""
    from fmcluster.app import build_app
    from fmcluster.registry import parse_spec

    template = synth_example("fabric-matrix")["fabric-cluster"]
    others = parse_spec({"name": "others", "region": "us-east-2", "availability_zone": "us-east-2a", "node_groups": [
        {"name": "p5e", "instance_type": "p5e.48xlarge", "count": 2},
        {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": 18,
         "capacity": {"type": "odcr", "reservation_id": "cr-0fedcba9876543210"}}]})
    out = tmp_path_factory.mktemp("others")
    build_app(others, outdir=str(out)).synth()
    extra = json.loads((out / "others-cluster.template.json").read_text())
    merged = json.loads(json.dumps(template))
    merged["Resources"].update(extra["Resources"])
    merged["Parameters"].update(extra["Parameters"])
    return merged


def launch_template_data(template, group):
    for lt in resources_of(template, "AWS::EC2::LaunchTemplate").values():
        data = lt["Properties"]["LaunchTemplateData"]
        tags = {t["Key"]: t["Value"] for t in data["TagSpecifications"][0]["Tags"]}
        if tags.get("fmcluster:node-group") == group:
            return data
    raise KeyError(group)


@pytest.mark.parametrize("group", sorted(EXPECTED_LAYOUT))
def test_interface_layout_matches_the_ec2_guide(matrix, group):
    interfaces = launch_template_data(matrix, group)["NetworkInterfaces"]
    layout = [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces]
    assert layout == EXPECTED_LAYOUT[group]
    groups = {json.dumps(i["Groups"]) for i in interfaces}
    assert len(groups) == 1 and len(interfaces[0]["Groups"]) == 1, "one (EFA) security group on every interface"
    assert all("SubnetId" in i for i in interfaces)
    assert interfaces[0]["AssociatePublicIpAddress"] is False
    assert not any(i.get("AssociatePublicIpAddress") for i in interfaces)


@pytest.mark.parametrize("group", sorted(EXPECTED_LAYOUT))
def test_imdsv2_and_encrypted_root_volume(matrix, group):
    data = launch_template_data(matrix, group)
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
    (root,) = data["BlockDeviceMappings"]
    assert root["Ebs"]["Encrypted"] is True and root["Ebs"]["VolumeType"] == "gp3"
    assert "SecurityGroupIds" not in data, "groups are set per interface"


def test_placement_groups_follow_strategy_and_capacity(matrix):
    pgs = resources_of(matrix, "AWS::EC2::PlacementGroup")
    strategies = {k.split("Placement")[0]: v["Properties"]["Strategy"] for k, v in pgs.items()}
    # ODCR groups (b200-odcr, gb200) get none of ours: the reservation is open or has its own
    assert strategies == {"B200": "cluster", "P5": "cluster", "P5e": "cluster", "P5en": "partition", "P5Small": "cluster"}
    assert pgs[next(k for k in pgs if k.startswith("P5en"))]["Properties"]["PartitionCount"] == 2
    b300 = launch_template_data(matrix, "b300")
    assert "Placement" not in b300, "Capacity Blocks never get a placement group"
    assert launch_template_data(matrix, "p5")["Placement"]["GroupName"]["Ref"].startswith("P5Placement")


def test_capacity_targeting(matrix):
    b300 = launch_template_data(matrix, "b300")
    assert b300["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert b300["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}}
    gb200 = launch_template_data(matrix, "gb200")
    assert "InstanceMarketOptions" not in gb200
    assert gb200["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == \
        "cr-0fedcba9876543210"
    p5 = launch_template_data(matrix, "p5")
    assert "CapacityReservationSpecification" not in p5 and "InstanceMarketOptions" not in p5


def test_dlami_is_an_ssm_parameter_resolved_at_deploy_time(matrix):
    params = matrix["Parameters"]
    dlami = {k: v for k, v in params.items() if k.startswith("SsmParameterValue")}
    assert {v["Default"] for v in dlami.values()} == {
        "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
        "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    }
    assert all(v["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>" for v in dlami.values())
    assert launch_template_data(matrix, "p5")["ImageId"]["Ref"] in dlami


def test_plain_ec2_templates_carry_instance_type_and_profile(matrix):
    data = launch_template_data(matrix, "p5")
    assert data["InstanceType"] == "p5.48xlarge"
    assert "Fn::GetAtt" in data["IamInstanceProfile"]["Arn"]


def test_user_data_reads_the_group_pointer_and_runs_the_node_bootstrap(synth_example):
    fabric = synth_example("fabric-matrix")["fabric-cluster"]
    data = launch_template_data(fabric, "b200")
    parts = data["UserData"]["Fn::Base64"]
    text = parts if isinstance(parts, str) else "".join(p if isinstance(p, str) else "<token>" for p in parts["Fn::Join"][1])
    assert text.startswith('Content-Type: multipart/mixed; boundary="==FMCLUSTER=="')
    assert "Content-Type: text/x-shellscript" in text
    assert "fm_pointer=boot/groups/b200.json fm_group=b200" in text
    assert "FMCLUSTER_PROFILE" not in text and '"instance_type"' not in text, "the profile travels in the pointer"
    assert "bash /opt/fmcluster/pkg/fmcluster/runtime/node_bootstrap.sh" in text
    pointer = boot_pointers(fabric)["boot/groups/b200.json"]
    profile = pointer["profile"]
    assert profile["instance_type"] == "p6-b200.48xlarge" and profile["group"] == "b200"
    assert profile["facts"]["efa_interfaces"] == 8 and profile["policy"] == "report" and profile["level"] == "fast"
    assert (pointer["level"], pointer["policy"]) == ("fast", "report")
    assert profile.get("orchestrator") is None  # no agent: drain and taint have nothing to wait for


def test_nodes_read_only_their_runtime_and_pointers_from_the_clusters_own_bucket(matrix):
    """Not the CDK bootstrap bucket: `cdk gc` would delete a runtime that nodes still name, and a bootstrap key the
    node role cannot use would fail every boot. Pointers by exact key, runtimes under their prefix (which one: the
    pointer says, with its sha256)."""
    (policy,) = [p for p in resources_of(matrix, "AWS::IAM::Policy").values()
                 if p["Properties"]["Roles"] == [{"Ref": "NodeRole52753DAC"}]]
    s3 = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "s3:GetObject"]
    assert len(s3) == 1
    keys = []
    for resource in s3[0]["Resource"]:
        bucket, key = resource["Fn::Join"][1]
        assert resources_of(matrix, "AWS::S3::Bucket")[bucket["Fn::GetAtt"][0]]  # a bucket of this stack
        keys.append(key)
    groups = {lt_group for lt_group in boot_pointers(matrix) if lt_group.startswith("boot/groups/")}
    assert sorted(keys) == sorted([f"/{g}" for g in groups] + ["/runtime/*"])
    for pointer in boot_pointers(matrix).values():
        assert pointer["runtime"]["key"] == f"runtime/{pointer['runtime']['sha256']}.zip"
    for lt in resources_of(matrix, "AWS::EC2::LaunchTemplate").values():
        user_data = json.dumps(lt["Properties"]["LaunchTemplateData"]["UserData"])
        assert "cdk-hnb659fds" not in user_data and not re.search(r"runtime/[0-9a-f]{64}", user_data)
        # the runtime and the pointers land before any node boots
        assert {"NodeRuntimeDeployCustomResourceB0C19F44", "NodeRuntimePointersCustomResource365AEE11"} <= set(lt["DependsOn"])


def test_the_runtime_bucket_keeps_every_runtime_a_pointer_or_an_older_launch_template_named(matrix):
    deployments = {k: v["Properties"] for k, v in resources_of(matrix, "Custom::CDKBucketDeployment").items()}
    runtime, pointers = deployments["NodeRuntimeDeployCustomResourceB0C19F44"], \
        deployments["NodeRuntimePointersCustomResource365AEE11"]
    assert runtime["Prune"] is False and runtime["DestinationBucketKeyPrefix"] == "runtime/"
    assert pointers["Prune"] is False and pointers["DestinationBucketKeyPrefix"] == "boot/"
    assert "NodeRuntimeDeployCustomResourceB0C19F44" in resources_of(matrix, "Custom::CDKBucketDeployment")[
        "NodeRuntimePointersCustomResource365AEE11"]["DependsOn"], "a pointer never names a runtime not yet copied"
    (bucket,) = [b for k, b in resources_of(matrix, "AWS::S3::Bucket").items() if k.startswith("NodeRuntimeBucket")]
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}


def test_the_root_device_follows_the_image_family():
    """A root volume mapped to the wrong device name is a second, unformatted disk and a small root (EC2 device
    naming: the root is /dev/sda1 or /dev/xvda depending on the AMI)."""
    from fmcluster.app import synthesize
    from fmcluster.registry import parse_spec

    spec = parse_spec({
        "name": "roots", "region": "us-east-1", "availability_zone": "us-east-1a",
        "node_groups": [{"name": "ubuntu", "instance_type": "p5.48xlarge", "count": 1},
                        {"name": "al2023", "instance_type": "p5.48xlarge", "count": 1, "image_family": "dlami-al2023"}],
    })
    cluster = synthesize(spec)["roots-cluster"]
    roots = {}
    for lt in resources_of(cluster, "AWS::EC2::LaunchTemplate").values():
        data = lt["Properties"]["LaunchTemplateData"]
        group = next(t["Value"] for t in data["TagSpecifications"][0]["Tags"] if t["Key"] == "fmcluster:node-group")
        (mapping,) = data["BlockDeviceMappings"]
        roots[group] = (mapping["DeviceName"], mapping["Ebs"]["VolumeSize"])
    assert roots == {"ubuntu": ("/dev/sda1", 200), "al2023": ("/dev/xvda", 200)}
    parameters = json.dumps(cluster["Parameters"])
    assert "base-oss-nvidia-driver-gpu-ubuntu-22.04" in parameters
    assert "base-oss-nvidia-driver-gpu-amazon-linux-2023" in parameters


def test_an_ami_without_a_declared_family_is_refused():
    from fmcluster.registry import parse_spec
    from fmcluster.spec import SpecError

    with pytest.raises(SpecError) as e:
        parse_spec({"name": "roots", "region": "us-east-1", "availability_zone": "us-east-1a",
                    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 1,
                                     "ami_id": "ami-0123456789abcdef0"}]})
    assert e.value.problems[0].startswith("node_groups[0].image_family: required with ami_id")


def test_odcr_groups_get_no_placement_group_of_ours_but_can_name_the_reservations():
    """An ODCR is open (a new placement group only narrows where instances fit) or made in a placement group of its
    own (the launch must name that one): fmcluster never creates one for an ODCR group."""
    from fmcluster.app import synthesize
    from fmcluster.registry import parse_spec
    from fmcluster.spec import SpecError

    odcr = {"type": "odcr", "reservation_id": "cr-0123456789abcdef0"}
    base = {"name": "odcr", "region": "us-east-1", "availability_zone": "us-east-1a"}
    spec = parse_spec({**base, "node_groups": [
        {"name": "open", "instance_type": "p5.48xlarge", "count": 1, "capacity": odcr},
        {"name": "bound", "instance_type": "p5.48xlarge", "count": 1, "capacity": odcr,
         "placement": {"existing_group": "odcr-pg"}}]})
    cluster = synthesize(spec)["odcr-cluster"]
    assert not resources_of(cluster, "AWS::EC2::PlacementGroup")
    placements = {}
    for lt in resources_of(cluster, "AWS::EC2::LaunchTemplate").values():
        data = lt["Properties"]["LaunchTemplateData"]
        group = next(t["Value"] for t in data["TagSpecifications"][0]["Tags"] if t["Key"] == "fmcluster:node-group")
        placements[group] = data.get("Placement")
    assert placements == {"open": None, "bound": {"GroupName": "odcr-pg"}}
    with pytest.raises(SpecError) as e:
        parse_spec({**base, "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 1, "capacity": odcr,
                                             "placement": {"strategy": "cluster"}}]})
    assert e.value.problems[0].startswith("node_groups[0].placement.strategy: an On-Demand Capacity Reservation")

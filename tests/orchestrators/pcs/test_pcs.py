"""`orchestrator: pcs`: a PCS cluster, a compute node group launched from the EFA launch
template and a queue per node group, a login node, and a least-privilege instance role."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import ROOT, boot_pointers, resources_of

from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError


@pytest.fixture(scope="module")
def p5(synth_example):
    return synth_example("pcs-p5")["pcs-p5-cluster"]


@pytest.fixture(scope="module")
def b200(synth_example):
    return synth_example("pcs-p6-b200-odcr")["pcs-b200-cluster"]


@pytest.fixture(scope="module")
def p5en(synth_example):
    return synth_example("pcs-p5en-capacity-block")["pcs-p5en-cluster"]


def node_groups(template):
    return {v["Properties"]["Name"]: v["Properties"] for v in resources_of(template, "AWS::PCS::ComputeNodeGroup").values()}


def test_cluster_is_slurm_sized_from_the_spec(p5, b200):
    (cluster,) = resources_of(p5, "AWS::PCS::Cluster").values()
    props = cluster["Properties"]
    assert props["Scheduler"] == {"Type": "SLURM", "Version": "24.11"}
    assert props["Size"] == "SMALL"  # 4 GPU nodes + login
    assert len(props["Networking"]["SecurityGroupIds"]) == 1 and len(props["Networking"]["SubnetIds"]) == 1
    (big,) = resources_of(b200, "AWS::PCS::Cluster").values()
    assert big["Properties"]["Size"] == "MEDIUM"


def test_compute_node_group_uses_the_efa_launch_template(p5):
    groups = node_groups(p5)
    h100 = groups["h100"]
    assert h100["InstanceConfigs"] == [{"InstanceType": "p5.48xlarge"}]
    assert h100["ScalingConfiguration"] == {"MinInstanceCount": 4, "MaxInstanceCount": 8}  # 4 static, up to 8
    assert h100["PurchaseOption"] == "ONDEMAND" and h100["AmiId"] == "ami-0123456789abcdef0"
    lt_ref = h100["CustomLaunchTemplate"]
    lt_id = lt_ref["TemplateId"]["Ref"]
    assert lt_ref["Version"] == {"Fn::GetAtt": [lt_id, "LatestVersionNumber"]}
    data = p5["Resources"][lt_id]["Properties"]["LaunchTemplateData"]
    assert len(data["NetworkInterfaces"]) == 33
    assert "InstanceType" not in data and "IamInstanceProfile" not in data, "PCS sets these itself"
    assert "Fn::GetAtt" in h100["IamInstanceProfileArn"]


def test_a_queue_per_group_and_a_login_node_without_one(p5, b200):
    queues = {v["Properties"]["Name"] for v in resources_of(p5, "AWS::PCS::Queue").values()}
    assert queues == {"h100"}
    login = node_groups(p5)["login"]
    assert login["InstanceConfigs"] == [{"InstanceType": "m5.xlarge"}]
    assert login["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}
    assert {v["Properties"]["Name"] for v in resources_of(b200, "AWS::PCS::Queue").values()} == {"b200", "prep"}


def test_capacity_block_and_odcr_purchase_options(p5en, b200):
    h200 = node_groups(p5en)["h200"]
    assert h200["PurchaseOption"] == "CAPACITY_BLOCK"
    data = p5en["Resources"][h200["CustomLaunchTemplate"]["TemplateId"]["Ref"]]["Properties"]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"]["MarketType"] == "capacity-block" and "Placement" not in data
    assert not resources_of(p5en, "AWS::EC2::PlacementGroup")
    gpu = node_groups(b200)["b200"]
    assert gpu["PurchaseOption"] == "ONDEMAND"
    lt = b200["Resources"][gpu["CustomLaunchTemplate"]["TemplateId"]["Ref"]]["Properties"]["LaunchTemplateData"]
    assert lt["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == \
        "cr-0fedcba9876543210"
    assert len(lt["NetworkInterfaces"]) == 9


def test_instance_role_meets_pcs_naming_and_least_privilege(p5):
    (role_id, role), = [(k, r) for k, r in resources_of(p5, "AWS::IAM::Role").items()
                        if "ec2.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])]
    assert role["Properties"]["Path"] == "/aws-pcs/"
    assert "ManagedPolicyArns" not in role["Properties"]
    (profile,) = resources_of(p5, "AWS::IAM::InstanceProfile").values()
    assert profile["Properties"]["Path"] == "/aws-pcs/"
    (policy,) = [p for p in resources_of(p5, "AWS::IAM::Policy").values()
                 if p["Properties"]["Roles"] == [{"Ref": role_id}]]
    actions = set()
    for st in policy["Properties"]["PolicyDocument"]["Statement"]:
        actions.update([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    assert "pcs:RegisterComputeNodeGroupInstance" in actions and "ssm:UpdateInstanceInformation" in actions
    assert not any("*" in a for a in actions)


def test_node_user_data_drains_through_slurmd(p5):
    lt = next(v for v in resources_of(p5, "AWS::EC2::LaunchTemplate").values()
              if len(v["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]) > 1)
    parts = lt["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
    text = "".join(p for p in parts if isinstance(p, str))
    group = text.split("fm_group=")[1].split()[0]
    pointer = boot_pointers(p5)[f"boot/groups/{group}.json"]
    assert pointer["policy"] == "drain" and pointer["profile"]["orchestrator"] == "slurm"


BASE = {"name": "pcs-t", "region": "us-east-1", "availability_zone": "us-east-1a", "orchestrator": {"type": "pcs"}}


AMI = {"ami_id": "ami-0123456789abcdef0", "image_family": "dlami-ubuntu-22.04"}


@pytest.mark.parametrize(
    "group, path, words",
    [
        ({"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}, "node_groups[0].ami_id", "PCS-ready AMI"),
        ({"name": "gpunodes01", "instance_type": "p5.48xlarge", "count": 2, **AMI},
         "node_groups[0].name", "exactly 10"),
        ({"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, **AMI,
          "capacity": {"type": "training-plan",
                       "training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p1"}},
         "node_groups[0].capacity.type", "HyperPod"),
    ],
)
def test_pcs_spec_checks(group, path, words):
    with pytest.raises(SpecError) as e:
        parse_spec({**BASE, "node_groups": [group]})
    assert any(line.startswith(f"{path}: ") and words in line for line in e.value.problems), e.value.problems


def test_pcs_size_too_small_for_the_fleet():
    data = {**BASE, "orchestrator": {"type": "pcs", "pcs": {"size": "SMALL"}},
            "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 40,
                             **AMI}]}
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    assert any(line.startswith("orchestrator.pcs.size: SMALL manages up to 32") for line in e.value.problems)


def test_slurm_runs_the_gpu_job_map_hooks_the_collectors_install_when_asked(p5, b200):
    from fmcluster.runtime.observability.slurm_job_map import hook_path

    (cluster,) = resources_of(p5, "AWS::PCS::Cluster").values()
    settings = cluster["Properties"]["SlurmConfiguration"]["SlurmCustomSettings"]
    assert settings == [{"ParameterName": "Prolog", "ParameterValue": hook_path("prolog")},
                        {"ParameterName": "Epilog", "ParameterValue": hook_path("epilog")}]
    # off by default: a node launched before its runtime wrote the hooks would drain on its next job
    (cluster,) = resources_of(b200, "AWS::PCS::Cluster").values()
    assert "SlurmCustomSettings" not in cluster["Properties"]["SlurmConfiguration"]
    # the hooks come with the collectors: the spec refuses the map without observability
    data = yaml.safe_load((ROOT / "examples" / "pcs-p5.yaml").read_text())
    data["observability"] = {"enabled": False}
    with pytest.raises(SpecError) as refused:
        parse_spec(data)
    assert "orchestrator.pcs.gpu_job_map" in str(refused.value)
    launch_templates = resources_of(p5, "AWS::EC2::LaunchTemplate").values()
    assert all("observability/install.sh" in json.dumps(t["Properties"]["LaunchTemplateData"]["UserData"])
               for t in launch_templates)

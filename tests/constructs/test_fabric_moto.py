"""The synthesized launch template is one EC2 accepts: create_launch_template from its
LaunchTemplateData, then run_instances from it (moto), for p5.48xlarge."""

from __future__ import annotations

import base64
import json
from typing import Any

import boto3
import pytest
from helpers.aws_fixtures import aws_env, moto  # noqa: F401 - fixtures


def _resolve(value: Any, refs: dict) -> Any:
    """Replace CloudFormation intrinsics with the ids moto created."""
    if isinstance(value, dict):
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Fn::ImportValue":
                return refs["sg"] if "SecurityGroup" in arg else refs["subnet"]
            if key == "Ref":
                return refs.get(arg, refs["ami"] if arg.startswith("SsmParameterValue") else arg)
            if key == "Fn::GetAtt":
                return refs["profile_arn"]
            if key == "Fn::Base64":
                text = value[key] if isinstance(value[key], str) else "".join(
                    p if isinstance(p, str) else "TOKEN" for p in value[key]["Fn::Join"][1])
                return base64.b64encode(text.encode()).decode()
        return {k: _resolve(v, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, refs) for v in value]
    return value


@pytest.fixture(scope="module")
def p5_launch_template_data(synth_example):
    template = synth_example("default")["fm-dev-cluster"]
    (lt,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    return lt["Properties"]["LaunchTemplateData"]


@pytest.mark.usefixtures("moto")
def test_ec2_accepts_the_p5_launch_template_and_launches_from_it(p5_launch_template_data):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(GroupName="efa", Description="efa", VpcId=vpc)["GroupId"]
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    iam = boto3.client("iam", region_name="us-east-1")
    iam.create_role(RoleName="node", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}))
    profile = iam.create_instance_profile(InstanceProfileName="node")["InstanceProfile"]["Arn"]
    iam.add_role_to_instance_profile(InstanceProfileName="node", RoleName="node")
    placement_ref = p5_launch_template_data["Placement"]["GroupName"]["Ref"]
    refs = {"sg": sg, "subnet": subnet, "ami": ami, "profile_arn": profile, placement_ref: "fm-dev-gpu"}
    data = _resolve(p5_launch_template_data, refs)
    data.pop("Placement")  # moto 5 implements no placement groups: the launch is checked without one

    lt = ec2.create_launch_template(LaunchTemplateName="p5", LaunchTemplateData=data)["LaunchTemplate"]
    stored = ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert len(stored["NetworkInterfaces"]) == 33
    assert stored["MetadataOptions"]["HttpTokens"] == "required"

    run = ec2.run_instances(LaunchTemplate={"LaunchTemplateId": lt["LaunchTemplateId"]}, MinCount=2, MaxCount=2)
    instances = run["Instances"]
    assert len(instances) == 2 and {i["InstanceType"] for i in instances} == {"p5.48xlarge"}
    # moto launches from the template shallowly (its own public IP, subnet and metadata defaults):
    # the template's interfaces and IMDS settings are asserted on the stored version above

"""`<name>-network`: a private node subnet sized for the nodes, NAT egress, S3 endpoint,
encrypted flow logs, and the EFA security group with self-referencing rules both ways."""

from __future__ import annotations

import ipaddress

import pytest
from helpers import resources_of

from fmcluster.registry import load_spec


@pytest.fixture(scope="module")
def default_net(synth_example):
    return synth_example("default")["fm-dev-network"]


@pytest.fixture(scope="module")
def existing_net(synth_example):
    return synth_example("existing-vpc")["fm-prod-network"]


def test_new_vpc_subnets_live_in_the_gpu_az_but_one_and_are_private(default_net):
    subnets = resources_of(default_net, "AWS::EC2::Subnet").values()
    assert sorted(s["Properties"]["AvailabilityZone"] for s in subnets) == ["us-east-1a"] * 3 + ["us-east-1b"]
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets)
    nodes = [s for s in subnets if {"Key": "aws-cdk:subnet-name", "Value": "Nodes"} in s["Properties"]["Tags"]]
    assert len(nodes) == 1
    spec = load_spec("examples/default.yaml")
    node_subnet = ipaddress.IPv4Network(nodes[0]["Properties"]["CidrBlock"])
    assert node_subnet.prefixlen == spec.node_subnet_prefix == 20
    assert node_subnet.num_addresses - 5 >= spec.required_ips
    (second,) = [s for s in subnets if s["Properties"]["AvailabilityZone"] == "us-east-1b"]
    assert second["Properties"]["CidrBlock"] == "10.0.0.128/27"  # first /24: public /26, storage /26, this /27


def test_egress_through_one_nat_and_s3_gateway_endpoint(default_net):
    assert len(resources_of(default_net, "AWS::EC2::NatGateway")) == 1
    endpoints = list(resources_of(default_net, "AWS::EC2::VPCEndpoint").values())
    assert len(endpoints) == 1 and endpoints[0]["Properties"]["VpcEndpointType"] == "Gateway"


def test_flow_logs_are_on_and_encrypted_with_a_rotating_key(default_net):
    (flow,) = resources_of(default_net, "AWS::EC2::FlowLog").values()
    assert flow["Properties"]["TrafficType"] == "ALL"
    (group,) = resources_of(default_net, "AWS::Logs::LogGroup").values()
    assert "KmsKeyId" in group["Properties"] and group["Properties"]["RetentionInDays"] == 90
    (key,) = resources_of(default_net, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"


def _efa_rules(template):
    (sg_id,) = resources_of(template, "AWS::EC2::SecurityGroup")
    ingress = list(resources_of(template, "AWS::EC2::SecurityGroupIngress").values())
    egress = list(resources_of(template, "AWS::EC2::SecurityGroupEgress").values())
    return sg_id, ingress, egress


@pytest.mark.parametrize("stack", ["default_net", "existing_net"])
def test_efa_group_allows_all_traffic_from_and_to_itself(stack, request):
    template = request.getfixturevalue(stack)
    sg_id, ingress, egress = _efa_rules(template)
    self_ref = {"Fn::GetAtt": [sg_id, "GroupId"]}
    assert any(r["Properties"]["IpProtocol"] == "-1" and r["Properties"]["SourceSecurityGroupId"] == self_ref
               for r in ingress)
    assert any(r["Properties"]["IpProtocol"] == "-1" and r["Properties"]["DestinationSecurityGroupId"] == self_ref
               for r in egress)
    sg = template["Resources"][sg_id]["Properties"]
    assert not sg.get("SecurityGroupIngress"), "nothing comes in from outside the group"
    assert {(r["IpProtocol"], r["FromPort"]) for r in sg["SecurityGroupEgress"]} == {("tcp", 443), ("tcp", 80)}


def test_existing_vpc_is_referenced_not_created(existing_net):
    assert not resources_of(existing_net, "AWS::EC2::VPC")
    assert not resources_of(existing_net, "AWS::EC2::Subnet")
    (endpoint,) = resources_of(existing_net, "AWS::EC2::VPCEndpoint").values()
    assert endpoint["Properties"]["RouteTableIds"] == ["rtb-0a1b2c3d4e5f60718"]
    (sg,) = resources_of(existing_net, "AWS::EC2::SecurityGroup").values()
    assert sg["Properties"]["VpcId"] == "vpc-0a1b2c3d4e5f60718"
    assert existing_net["Outputs"]["NodeSubnetIds"]["Value"] == "subnet-0a1b2c3d4e5f60718"


def test_template_size_does_not_grow_with_node_count(tmp_path):
    import json

    from fmcluster.app import build_app
    from fmcluster.registry import parse_spec

    sizes = []
    for count in (2, 64):
        spec = parse_spec({"name": "scale", "region": "us-east-1", "availability_zone": "us-east-1a",
                           "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": count}]})
        out = tmp_path / str(count)
        build_app(spec, outdir=str(out), nag=False).synth()
        templates = sorted(out.glob("*.template.json"))
        sizes.append(sum(len(json.dumps(json.loads(p.read_text()))) for p in templates))
    assert abs(sizes[0] - sizes[1]) < 64, sizes  # only numbers (subnet mask, counts) change

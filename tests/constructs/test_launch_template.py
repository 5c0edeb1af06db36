"""A node launch template's props refuse what EC2 would refuse at deploy time, before any CDK object exists."""

from dataclasses import replace

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Template

from fmcluster import catalog
from fmcluster.constructs.launch_template import LaunchTemplateProps
from fmcluster.constructs.node_group import Ec2NodeGroup

P5 = LaunchTemplateProps(instance=catalog.get("p5.48xlarge"), efa=True, security_group_ids=["sg-0123456789abcdef0"],
                         subnet_id="subnet-0123456789abcdef0", image_id="ami-0123456789abcdef0",
                         root_device_name="/dev/sda1", user_data="#!/bin/bash\n")


@pytest.mark.parametrize("change, field", [
    ({"imds_hop_limit": 0}, "imds_hop_limit"),
    ({"capacity_type": "spot"}, "capacity_type"),
    ({"capacity_type": "odcr"}, "reservation_id"),
    ({"capacity_type": "capacity-block", "reservation_id": "cr-0123456789abcdef0", "placement_group_name": "pg"},
     "placement_group_name"),
])
def test_props_refuse_a_combination_ec2_refuses_naming_the_field(change, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        replace(P5, **change)


def a_stack() -> Stack:
    from fmcluster.app import new_app

    return Stack(new_app(nag=False), "S")


def test_a_node_group_places_its_template_in_the_placement_group_it_creates():
    stack = a_stack()
    Ec2NodeGroup(stack, "Gpu", template=P5, placement_strategy="cluster")
    template = Template.from_stack(stack)
    data = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))["Properties"]["LaunchTemplateData"]
    assert data["Placement"]["GroupName"] == {"Ref": next(iter(template.find_resources("AWS::EC2::PlacementGroup")))}
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert len([n for n in data["NetworkInterfaces"] if n["InterfaceType"] in ("efa", "efa-only")]) == 32


def test_a_node_group_sets_the_placement_group_itself():
    with pytest.raises(ValueError, match="^template.placement_group_name:"):
        Ec2NodeGroup(a_stack(), "Gpu", template=replace(P5, placement_group_name="mine"))

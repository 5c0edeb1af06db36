"""The long-lived stacks do not depend on the orchestrator or the node counts: switching `orchestrator.type` or
scaling a group leaves every network and storage resource and every export the cluster stack imports as it was
(CloudFormation refuses to change or remove an export in use, and a new subnet CIDR replaces the subnet)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from helpers import resources_of

from fmcluster.registry import BUILT_IN, parse_spec

ROOT = Path(__file__).resolve().parents[2]
KINDS = [kind.name for kind in BUILT_IN]
IMAGE_FIELDS = ("ami_id", "image_family")
HUNGRIEST = max(BUILT_IN, key=lambda kind: kind.nodes.addresses).name


def example_of(kind: str) -> Dict[str, Any]:
    """The kind's first example in us-east-1a (where the spec below lives)."""
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if (data.get("orchestrator") or {}).get("type", KINDS[0]) == kind and data["availability_zone"] == "us-east-1a":
            return data
    raise AssertionError(f"no example of orchestrator {kind} in us-east-1a")


def spec_data(kind: str, count: int = 4) -> Dict[str, Any]:
    """One spec; only its orchestrator section (the kind's example's) and, for kinds that boot fmcluster's launch
    templates from an image of the user's, the group's image fields (the example's) differ. The network and storage
    stacks read neither."""
    example = example_of(kind)
    image = {k: v for k, v in example["node_groups"][0].items() if k in IMAGE_FIELDS}
    return {"name": "fm-switch", "region": "us-east-1", "availability_zone": "us-east-1a",
            "node_groups": [{"name": "h100", "instance_type": "p5.48xlarge", "count": count, **image},
                            {"name": "prep", "role": "cpu", "instance_type": "c5.18xlarge", "count": 2, **image}],
            "storage": {"fsx": {"storage_capacity_gib": 1200}},
            "orchestrator": copy.deepcopy(example.get("orchestrator") or {"type": kind})}


def synth(data: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The network and storage stacks of a spec, under the names a deploy gives them (logical ids of rules between
    groups derive from the stack names, so every case gets the same names and its own app)."""
    from fmcluster.app import new_app
    from fmcluster.registry import stores
    from fmcluster.stacks.network import NetworkStack
    from fmcluster.stacks.storage import StorageStack

    spec = parse_spec(data)
    app = new_app(spec, nag=False)
    network = NetworkStack(app, spec.stack_name("network"), spec=spec)
    StorageStack(app, spec.stack_name("storage"), spec=spec, network=network, stores=stores())
    assembly = app.synth()
    return {part: assembly.get_stack_by_name(spec.stack_name(part)).template for part in ("network", "storage")}


@pytest.fixture(scope="module")
def synthesized() -> Dict[str, Dict[str, Dict[str, Any]]]:
    """One synth per kind for the same spec (4 nodes), and one of the kind whose nodes take the most addresses (pods
    under the VPC CNI) at 32 nodes."""
    cases = {kind: spec_data(kind) for kind in KINDS}
    cases["scaled"] = spec_data(HUNGRIEST, 32)
    return {case: synth(data) for case, data in cases.items()}


@pytest.mark.parametrize("part", ["network", "storage"])
def test_switching_orchestrator_leaves_the_stack_and_its_exports_unchanged(synthesized, part):
    by_kind = {kind: synthesized[kind][part] for kind in KINDS}
    first = by_kind[KINDS[0]]
    assert [kind for kind, t in by_kind.items() if t != first] == []
    assert first["Outputs"] and first["Resources"]


def test_every_kind_gets_the_second_az_subnet_and_exports_what_any_kind_imports(synthesized):
    network = synthesized[KINDS[0]]["network"]
    subnets = resources_of(network, "AWS::EC2::Subnet")
    assert sorted(s["Properties"]["AvailabilityZone"] for s in subnets.values()) == ["us-east-1a"] * 3 + ["us-east-1b"]
    exported = [o["Value"] for o in network["Outputs"].values() if "Export" in o]
    (vpc,) = resources_of(network, "AWS::EC2::VPC")
    (group,) = resources_of(network, "AWS::EC2::SecurityGroup")
    private = [lid for lid, s in subnets.items() if {"Key": "aws-cdk:subnet-type", "Value": "Public"}
               not in s["Properties"].get("Tags", [])]
    assert sorted(map(json.dumps, exported)) == sorted(map(json.dumps, [
        {"Ref": vpc}, {"Fn::GetAtt": [group, "GroupId"]}, *({"Ref": lid} for lid in private)]))
    storage = synthesized[KINDS[0]]["storage"]
    assert sorted(json.dumps(o["Value"]) for o in storage["Outputs"].values()
                  if o.get("Export", {}).get("Name", "").startswith("fm-switch-storage:")) == sorted(map(json.dumps, [
                      {"Ref": "FileSystem"}, {"Fn::GetAtt": ["FileSystem", "DNSName"]},
                      {"Fn::GetAtt": ["FileSystem", "LustreMountName"]}]))


def test_scaling_up_keeps_every_subnet(synthesized):
    """4 -> 32 p5.48xlarge under the kind whose nodes take the most addresses: the same subnets, CIDRs and exports
    (sizes derived from the counts replaced the node subnet past each power of two)."""
    assert synthesized["scaled"]["network"] == synthesized[HUNGRIEST]["network"]


def test_the_examples_long_lived_stacks_export_and_tag_alike_whatever_their_orchestrator():
    """The committed templates (held current by test_quality), synthesized with their cluster stacks: each new-VPC
    network stack exports its VPC, every private subnet and the EFA group, each storage stack with FSx its file
    system's id, DNS name and mount name, and each observability stack its workspace's ARN and endpoint, whether the
    example's cluster stack imports them or not; and no cluster stack adds tags to the network stack's resources that
    another kind would not."""
    checked, kubernetes_tags = 0, {}
    for network_path in sorted((ROOT / "templates").glob("*/*-network.template.json")):
        network = json.loads(network_path.read_text())
        exported = {json.dumps(o["Value"]) for o in network["Outputs"].values() if "Export" in o}
        (group,) = resources_of(network, "AWS::EC2::SecurityGroup")
        want = {json.dumps({"Fn::GetAtt": [group, "GroupId"]})}
        if resources_of(network, "AWS::EC2::VPC"):
            (vpc,) = resources_of(network, "AWS::EC2::VPC")
            want |= {json.dumps({"Ref": vpc})} | {
                json.dumps({"Ref": lid}) for lid, s in resources_of(network, "AWS::EC2::Subnet").items()
                if {"Key": "aws-cdk:subnet-type", "Value": "Public"} not in s["Properties"].get("Tags", [])}
        # and what the storage stack's stores read from it (a directory bucket's location: the storage subnet's AZ
        # id), which the spec's storage decides, never the orchestrator
        storage_text = network_path.with_name(network_path.name.replace("-network.", "-storage.")).read_text()
        want |= {json.dumps(o["Value"]) for o in network["Outputs"].values() if "Export" in o
                 and o["Export"]["Name"] in storage_text and isinstance(o["Value"], dict)
                 and o["Value"].get("Fn::GetAtt", [None, None])[1] == "AvailabilityZoneId"}
        assert exported == want, network_path.parent.name
        if resources_of(network, "AWS::EC2::VPC"):
            # an EKS control plane tags the VPC's subnets (aws-eks-v2): the stack carries those tags under every kind
            kubernetes_tags[network_path.parent.name] = sorted(
                (r["Type"], lid.replace("ExtraA", "ExtraB"), t["Key"]) for lid, r in network["Resources"].items()
                for t in r.get("Properties", {}).get("Tags", []) if t["Key"].startswith("kubernetes.io/"))
        storage = json.loads(next(network_path.parent.glob("*-storage.template.json")).read_text())
        if resources_of(storage, "AWS::FSx::FileSystem"):
            values = {json.dumps(o["Value"]) for o in storage["Outputs"].values() if "Export" in o}
            assert {json.dumps({"Fn::GetAtt": ["FileSystem", "DNSName"]}), json.dumps({"Ref": "FileSystem"}),
                    json.dumps({"Fn::GetAtt": ["FileSystem", "LustreMountName"]})} <= values, network_path.parent.name
        observability = next(network_path.parent.glob("*-observability.template.json"), None)
        if observability is not None:
            values = {json.dumps(o["Value"]) for o in json.loads(observability.read_text())["Outputs"].values()
                      if "Export" in o}
            assert values == {json.dumps({"Fn::GetAtt": ["PrometheusWorkspaceF3098DB6", attribute]})
                              for attribute in ("Arn", "PrometheusEndpoint")}, network_path.parent.name
        checked += 1
    assert checked >= 10
    first = next(iter(kubernetes_tags.values()))
    assert first and [name for name, tags in kubernetes_tags.items() if tags != first] == []

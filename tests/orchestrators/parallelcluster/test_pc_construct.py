"""The synthesized ParallelCluster: the provider nested stack, `Custom::PclusterCluster` with the configuration as
an object of CloudFormation references, the node policies and their exact S3 reads, placement groups, outputs; and
the constructs' props refused by name."""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Dict, List

import pytest
from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from helpers import actions_of, resources_of
from pchelpers import ROOT, cluster_resource, configuration, make_spec

from fmcluster.app import new_app
from fmcluster.constructs.node_bootstrap import NodeRuntime
from fmcluster.orchestrators.parallelcluster.cluster import PclusterCluster
from fmcluster.orchestrators.parallelcluster.construct import node_profile_json
from fmcluster.orchestrators.parallelcluster.node_policy import NodePolicy
from fmcluster.orchestrators.parallelcluster.node_script import OnNodeConfiguredScript
from fmcluster.orchestrators.parallelcluster.provider import ParallelClusterProvider
from fmcluster.runtime.profile import NodeProfile
from fmcluster.spec import load_spec

P5 = "parallelcluster-p5"
CB = "parallelcluster-p5en-capacity-block"


def cluster_template(synth_example, example: str) -> Dict[str, Any]:
    spec = load_spec(ROOT / "examples" / f"{example}.yaml")
    return synth_example(example)[spec.stack_name("cluster")]


def exports(synth_example, example: str) -> Dict[str, str]:
    """Export name -> the stack that exports it."""
    found = {}
    for stack, template in synth_example(example).items():
        for out in template.get("Outputs", {}).values():
            if "Export" in out:
                found[out["Export"]["Name"]] = stack
    return found


def policy(template: Dict[str, Any], logical_prefix: str) -> Dict[str, Any]:
    (found,) = [v for k, v in resources_of(template, "AWS::IAM::ManagedPolicy").items() if k.startswith(logical_prefix)]
    return found["Properties"]


def statements(props: Dict[str, Any]) -> List[Dict[str, Any]]:
    return props["PolicyDocument"]["Statement"]


def s3_url_of(value: Any) -> str:
    """`s3://bucket/key` of an asset URL as the template writes it (Fn::Sub with the account)."""
    return value["Fn::Sub"]


def object_arn_key(resource: Any) -> str:
    """The object key of an asset object ARN (Fn::Join [..., bucket, "/<key>"])."""
    return resource["Fn::Join"][1][-1].lstrip("/")


# --- provider and cluster resource ------------------------------------------------------------------------------


def test_the_provider_is_parallelclusters_published_template_as_a_nested_stack(synth_example):
    t = cluster_template(synth_example, P5)
    (provider_id, provider), = resources_of(t, "AWS::CloudFormation::Stack").items()
    assert provider["Properties"]["TemplateURL"] == {"Fn::Sub": (
        "https://${AWS::Region}-aws-parallelcluster.s3.${AWS::Region}.${AWS::URLSuffix}"
        "/parallelcluster/3.16.1/templates/custom_resource/cluster.yaml")}
    assert "Parameters" not in provider["Properties"]  # the template's own Lambda role, allowed parallelcluster-* policies
    _, cluster = cluster_resource(t)
    assert cluster["Properties"]["ServiceToken"] == {"Fn::GetAtt": [provider_id, "Outputs.ServiceToken"]}


def test_the_cluster_resource_carries_the_configuration_as_an_object(synth_example):
    _, cluster = cluster_resource(cluster_template(synth_example, P5))
    props = cluster["Properties"]
    assert set(props) == {"ServiceToken", "ClusterName", "ClusterConfiguration", "DeletionPolicy"}
    assert props["ClusterName"] == "pc-p5" and props["DeletionPolicy"] == "Delete"
    assert isinstance(props["ClusterConfiguration"], dict)
    assert cluster["DeletionPolicy"] == "Delete"  # the replaceable cluster stack takes the cluster with it


def test_subnet_security_group_and_file_system_are_cross_stack_references(synth_example):
    config = configuration(cluster_template(synth_example, P5))
    exported = exports(synth_example, P5)
    subnet = config["HeadNode"]["Networking"]["SubnetId"]
    sg = config["HeadNode"]["Networking"]["SecurityGroups"][0]
    fs = config["SharedStorage"][0]["FsxLustreSettings"]["FileSystemId"]
    assert exported[subnet["Fn::ImportValue"]] == "pc-p5-network" and "Subnet" in subnet["Fn::ImportValue"]
    assert exported[sg["Fn::ImportValue"]] == "pc-p5-network" and "EfaSecurityGroup" in sg["Fn::ImportValue"]
    assert exported[fs["Fn::ImportValue"]] == "pc-p5-storage" and "FileSystem" in fs["Fn::ImportValue"]
    for q in config["Scheduling"]["SlurmQueues"]:
        assert q["Networking"]["SubnetIds"] == [subnet] and q["Networking"]["SecurityGroups"] == [sg]


def test_policies_placement_groups_and_scripts_are_references_to_this_stack(synth_example):
    t = cluster_template(synth_example, P5)
    config = configuration(t)
    managed = resources_of(t, "AWS::IAM::ManagedPolicy")
    head = config["HeadNode"]["Iam"]["AdditionalIamPolicies"][0]["Policy"]["Ref"]
    assert head in managed and head.startswith("ParallelClusterHeadNodePolicy")
    h100, prep = config["Scheduling"]["SlurmQueues"]
    compute = h100["Iam"]["AdditionalIamPolicies"][0]["Policy"]["Ref"]
    assert compute in managed and compute.startswith("ParallelClusterComputePolicy")
    assert prep["Iam"] == h100["Iam"]
    pg = h100["Networking"]["PlacementGroup"]
    assert pg["Enabled"] is True and resources_of(t, "AWS::EC2::PlacementGroup")[pg["Name"]["Ref"]]
    assert "PlacementGroup" not in prep["Networking"]  # no EFA, no placement asked
    script = h100["CustomActions"]["OnNodeConfigured"]["Script"]
    assert re.fullmatch(r"s3://cdk-hnb659fds-assets-\$\{AWS::AccountId\}-us-east-1/[0-9a-f]{64}\.sh", s3_url_of(script))


def test_capacity_block_example_has_no_placement_group_and_only_static_nodes(synth_example):
    t = cluster_template(synth_example, CB)
    assert resources_of(t, "AWS::EC2::PlacementGroup") == {}
    (q,) = configuration(t)["Scheduling"]["SlurmQueues"]
    assert q["CapacityType"] == "CAPACITY_BLOCK" and q["Networking"]["PlacementGroup"] == {"Enabled": False}
    (cr,) = q["ComputeResources"]
    assert cr["MinCount"] == cr["MaxCount"] == 8
    assert cluster_resource(t)[1]["Properties"]["ClusterName"] == "pc-p5en-slurm"


def test_parallelcluster_launches_its_own_instances(synth_example):
    t = cluster_template(synth_example, P5)
    assert resources_of(t, "AWS::EC2::LaunchTemplate") == {} and resources_of(t, "AWS::IAM::Role") == {}


# --- what the nodes may read -----------------------------------------------------------------------------------


def _s3_objects(props: Dict[str, Any]) -> List[str]:
    keys = []
    for st in statements(props):
        if "s3:GetObject" in actions_of(st) and st.get("Sid") is None:
            keys += [object_arn_key(r) for r in (st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]])]
    return sorted(keys)


def _asset_keys(config: Dict[str, Any]) -> List[str]:
    action = config["Scheduling"]["SlurmQueues"][0]["CustomActions"]["OnNodeConfigured"]
    runtime = action["Args"][action["Args"].index("--runtime") + 1]
    return sorted(s3_url_of(u).rsplit("/", 1)[1] for u in (action["Script"], runtime))


def test_compute_nodes_read_exactly_the_script_and_the_runtime(synth_example):
    t = cluster_template(synth_example, P5)
    props = policy(t, "ParallelClusterComputePolicy")
    assert props["ManagedPolicyName"] == "parallelcluster-pc-p5-us-east-1-compute"
    assert _s3_objects(props) == _asset_keys(configuration(t))
    by_sid = {st.get("Sid"): st for st in statements(props)}
    # the data bucket (storage stack's grant) and AMP (observability's): nothing else
    assert {"SsmAgent", "DataBucketObjects", "DataBucketListing", "DataBucketKey"} <= set(by_sid)
    extra = [st for st in statements(props) if st.get("Sid") is None and "s3:GetObject" not in actions_of(st)]
    assert [actions_of(st) for st in extra] == [["aps:RemoteWrite"]]


def test_the_head_node_reads_the_script_and_runtime_and_writes_metrics_nothing_more(synth_example):
    t = cluster_template(synth_example, P5)
    props = policy(t, "ParallelClusterHeadNodePolicy")
    assert props["ManagedPolicyName"] == "parallelcluster-pc-p5-us-east-1-head"
    assert _s3_objects(props) == _asset_keys(configuration(t))
    sids = [st.get("Sid") for st in statements(props)]
    assert "DataBucketObjects" not in sids
    assert sorted(tuple(actions_of(st)) for st in statements(props) if st.get("Sid") is None) == [
        ("aps:RemoteWrite",), ("s3:GetObject",)]


def test_without_observability_the_head_node_runs_no_script_and_reads_nothing(tmp_path):
    from fmcluster.app import build_stacks

    spec = make_spec(observability={"enabled": False})
    stacks = build_stacks(spec, outdir=str(tmp_path))
    t = stacks.app.synth().get_stack_by_name("pc-test-cluster").template
    config = configuration(t)
    assert "CustomActions" not in config["HeadNode"]
    head = policy(t, "ParallelClusterHeadNodePolicy")
    assert [st["Sid"] for st in statements(head)] == ["SsmAgent"]
    args = config["Scheduling"]["SlurmQueues"][0]["CustomActions"]["OnNodeConfigured"]["Args"]
    assert "--remote-write-url" not in args


def test_policy_names_let_the_providers_default_role_attach_them(synth_example):
    for example in (P5, CB):
        for props in (p["Properties"] for p in resources_of(cluster_template(synth_example, example),
                                                              "AWS::IAM::ManagedPolicy").values()):
            assert props["ManagedPolicyName"].startswith("parallelcluster")


def test_every_queue_runs_the_validator_with_its_own_profile_and_the_spec_level_and_policy(synth_example):
    spec = load_spec(ROOT / "examples" / f"{P5}.yaml")
    config = configuration(cluster_template(synth_example, P5))
    for group, q in zip(spec.node_groups, config["Scheduling"]["SlurmQueues"]):
        args = q["CustomActions"]["OnNodeConfigured"]["Args"]
        opts = {a: args[i + 1] for i, a in enumerate(args) if isinstance(a, str) and a.startswith("--")}
        assert opts["--role"] == "compute" and opts["--level"] == "standard" and opts["--policy"] == "fail"
        assert opts["--node-group"] == group.name and opts["--cluster"] == "pc-p5"
        profile = base64.b64decode(opts["--profile-b64"]).decode()
        assert profile == node_profile_json(spec, group)
        loaded = NodeProfile.from_json(profile)
        assert loaded.orchestrator == "slurm" and loaded.group == group.name and loaded.facts["vcpus"] == group.instance.vcpus
    head = config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Args"]
    assert head[:2] == ["--role", "head"] and "--profile-b64" not in head and "head-node" in head


def test_nodes_get_their_types_compatibility_floors_which_the_official_ami_meets():
    from fmcluster import catalog
    from fmcluster.runtime import versions

    spec = make_spec()
    floors = json.loads(node_profile_json(spec, spec.node_groups[0]))["min_versions"]
    assert floors == catalog.get("p5.48xlarge").min_versions
    official_3_13 = {"driver": "570.86.15", "cuda": "12.8"}  # aws-parallelcluster-cookbook pull request 2887
    assert all(versions.at_least(official_3_13[k], floors[k]) for k in official_3_13)


def test_outputs_name_the_cluster_its_validation_messages_and_head_node(synth_example):
    t = cluster_template(synth_example, P5)
    cluster_id, _ = cluster_resource(t)
    out = t["Outputs"]
    assert out["ParallelClusterName"]["Value"] == "pc-p5"
    assert out["ParallelClusterValidationMessages"]["Value"] == {"Fn::GetAtt": [cluster_id, "validationMessages"]}
    assert out["HeadNodeInstanceId"]["Value"] == {"Fn::GetAtt": [cluster_id, "headNode.instanceId"]}


# --- props refused by name -------------------------------------------------------------------------------------


@pytest.fixture
def stack() -> Stack:
    return Stack(new_app(nag=False), "T")


def test_provider_props(stack):
    with pytest.raises(ValueError, match="^version:"):
        ParallelClusterProvider(stack, "P", version="2.11.9")
    with pytest.raises(ValueError, match="^custom_lambda_role_arn:"):
        ParallelClusterProvider(stack, "Q", version="3.16.1", custom_lambda_role_arn="arn:aws:iam::1:user/x")
    with pytest.raises(ValueError, match="^additional_iam_policy_arns:"):
        ParallelClusterProvider(stack, "R", version="3.16.1", custom_lambda_role_arn="arn:aws:iam::1:role/x",
                                additional_iam_policy_arns=["arn:aws:iam::1:policy/p"])
    p = ParallelClusterProvider(stack, "S", version="3.16.1",
                                additional_iam_policy_arns=["arn:aws:iam::1:policy/a", "arn:aws:iam::1:policy/b"])
    assert stack.resolve(p.stack.parameters) == {"AdditionalIamPolicies": "arn:aws:iam::1:policy/a,arn:aws:iam::1:policy/b"}


def test_cluster_props(stack):
    good = {"HeadNode": {}, "Image": {}, "Scheduling": {}}
    with pytest.raises(ValueError, match="^cluster_name:"):
        PclusterCluster(stack, "A", service_token="arn", cluster_name="not valid", configuration=good)
    with pytest.raises(ValueError, match="^configuration:.*mapping"):
        PclusterCluster(stack, "B", service_token="arn", cluster_name="ok", configuration="HeadNode: {}")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^configuration: missing Scheduling"):
        PclusterCluster(stack, "C", service_token="arn", cluster_name="ok", configuration={"HeadNode": {}, "Image": {}})
    with pytest.raises(ValueError, match="^deletion_policy:"):
        PclusterCluster(stack, "D", service_token="arn", cluster_name="ok", configuration=good, deletion_policy="Snapshot")


def test_node_policy_props_and_principal(stack):
    with pytest.raises(ValueError, match="^name:"):
        NodePolicy(stack, "A", name="fmcluster-nodes")
    p = NodePolicy(stack, "B", name="parallelcluster-x-compute")
    grant = iam.Grant.add_to_principal(grantee=p, actions=["s3:GetObject"], resource_arns=["arn:aws:s3:::b/k"])
    assert isinstance(grant, iam.Grant) and grant.success
    doc = stack.resolve(p.policy.document.to_json())
    assert {"Action": "s3:GetObject", "Effect": "Allow", "Resource": "arn:aws:s3:::b/k"} in doc["Statement"]
    with pytest.raises(Exception, match="no principal of a resource policy"):
        _ = p.policy_fragment


def test_script_props_and_grant(stack):
    runtime = NodeRuntime(stack, "Runtime")
    with pytest.raises(ValueError, match="^cluster:"):
        OnNodeConfiguredScript(stack, "A", runtime=runtime, region="us-east-1", remote_write_url="https://x/")
    with pytest.raises(ValueError, match="^scrape_interval:"):
        OnNodeConfiguredScript(stack, "B", runtime=runtime, region="us-east-1", scrape_interval=5)
    s = OnNodeConfiguredScript(stack, "C", runtime=runtime, region="us-east-1")
    with pytest.raises(ValueError, match="^role:"):
        s.action(role="login", node_group="g")
    with pytest.raises(ValueError, match="^profile_json:"):
        s.action(role="compute", node_group="g")
    with pytest.raises(ValueError, match="^policy:"):
        s.action(role="compute", node_group="g", profile_json="{}", policy="taint")
    with pytest.raises(ValueError, match="^node_group:"):
        s.action(role="head", node_group="two words")
    p = NodePolicy(stack, "P", name="parallelcluster-p")
    grant = s.grant_read(p)
    assert isinstance(grant, iam.Grant) and grant.success

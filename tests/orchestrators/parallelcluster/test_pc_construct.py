"""The synthesized ParallelCluster: the provider nested stack, `Custom::PclusterCluster` with the configuration as
an object of CloudFormation references, the node policies and their exact S3 reads, placement groups, outputs; and
the constructs' props refused by name."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List

import pytest
from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from helpers import actions_of, resources_of
from helpers.parallelcluster import ROOT, cluster_resource, configuration, make_spec

from fmcluster.app import new_app
from fmcluster.orchestrators.parallelcluster.cluster import PclusterCluster
from fmcluster.orchestrators.parallelcluster.construct import node_profile_json
from fmcluster.orchestrators.parallelcluster.node_policy import NodePolicy
from fmcluster.orchestrators.parallelcluster.node_script import OnNodeConfiguredScript
from fmcluster.orchestrators.parallelcluster.provider import ParallelClusterProvider
from fmcluster.registry import load_spec
from fmcluster.runtime.profile import NodeProfile

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


def assets_bucket(template: Dict[str, Any]) -> str:
    """The node assets bucket: where the deployment writes (the other bucket receives its access logs)."""
    (bucket,) = {str(d["Properties"]["DestinationBucketName"]["Ref"])
                 for d in resources_of(template, "Custom::CDKBucketDeployment").values()}
    return bucket


def statements(props: Dict[str, Any]) -> List[Dict[str, Any]]:
    return props["PolicyDocument"]["Statement"]


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
    bucket = assets_bucket(t)
    assert script == {"Fn::Join": ["", ["s3://", {"Ref": bucket}, "/fmcluster/on_node_configured.sh"]]}


@pytest.mark.parametrize("deletion_policy", ["Delete", "Retain"])
def test_a_retained_cluster_keeps_what_its_nodes_use_so_the_stack_can_be_deleted(tmp_path, deletion_policy):
    """With Retain the cluster keeps running after the stack is deleted; its node policies stay
    attached to ParallelCluster's roles and its placement group in use, so deleting them would fail the stack's
    deletion; its replacement nodes still read the node assets bucket."""
    from fmcluster.app import build_stacks

    spec = make_spec({"deletion_policy": deletion_policy})
    t = build_stacks(spec, outdir=str(tmp_path)).app.synth().get_stack_by_name("pc-test-cluster").template
    for kind in ("AWS::IAM::ManagedPolicy", "AWS::EC2::PlacementGroup", "AWS::S3::Bucket"):
        found = resources_of(t, kind)
        assert found, kind
        for logical_id, r in found.items():  # CloudFormation's default is Delete
            if logical_id.startswith("ParallelClusterNodeAssetsAccessLogs"):
                continue  # the access logs are kept either way, like every access log bucket's
            policies = (r.get("DeletionPolicy", "Delete"), r.get("UpdateReplacePolicy", "Delete"))
            assert policies == (deletion_policy, deletion_policy), kind
    assert cluster_resource(t)[1]["Properties"]["DeletionPolicy"] == deletion_policy
    # a retained bucket is not emptied on delete
    assert bool(resources_of(t, "Custom::S3AutoDeleteObjects")) == (deletion_policy == "Delete")


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
    assert resources_of(t, "AWS::EC2::LaunchTemplate") == {} and resources_of(t, "AWS::IAM::InstanceProfile") == {}
    # the only roles are the deployment handlers' (the node assets sync and CDK's bucket emptier), none for a node
    roles = resources_of(t, "AWS::IAM::Role")
    assert {r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"]
            for r in roles.values()} == {"lambda.amazonaws.com"}


# --- what the nodes may read -----------------------------------------------------------------------------------


def _s3_objects(props: Dict[str, Any]) -> List[str]:
    keys = []
    for st in statements(props):
        if "s3:GetObject" in actions_of(st) and st.get("Sid") is None:
            keys += [object_arn_key(r) for r in (st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]])]
    return sorted(keys)


# the runtime by prefix: settings.json names one object under it, with the sha256 the node checks
NODE_OBJECTS = ["fmcluster/on_node_configured.sh", "fmcluster/runtime/*", "fmcluster/settings.json"]


def test_compute_nodes_read_exactly_the_script_the_runtime_the_settings_and_their_profiles(synth_example):
    t = cluster_template(synth_example, P5)
    props = policy(t, "ParallelClusterComputePolicy")
    assert props["ManagedPolicyName"] == "parallelcluster-pc-p5-us-east-1-compute"
    # each group's one object (groups/: settings and profile of one deployment) and, for scripts of earlier releases,
    # its profile
    assert _s3_objects(props) == sorted(NODE_OBJECTS + [f"fmcluster/{d}/{g}.json" for d in ("groups", "profiles")
                                                        for g in ("h100", "prep")])
    by_sid = {st.get("Sid"): st for st in statements(props)}
    # the data bucket (storage stack's grant) and AMP (observability's): nothing else
    assert {"SsmAgent", "DataBucketRead", "DataBucketListing", "DataBucketKey"} <= set(by_sid)
    extra = [st for st in statements(props) if st.get("Sid") is None and "s3:GetObject" not in actions_of(st)]
    # its node report (runtime/node_report.py), written under its group's prefix of the node assets bucket, and
    # metrics
    assert [actions_of(st) for st in extra] == [["s3:PutObject"], ["aps:RemoteWrite"]]
    assert [object_arn_key(r) for r in extra[0]["Resource"]] == ["fmcluster/node-reports/h100/*",
                                                                 "fmcluster/node-reports/prep/*"]


def test_the_head_node_reads_the_script_runtime_and_settings_and_writes_metrics_nothing_more(synth_example):
    t = cluster_template(synth_example, P5)
    props = policy(t, "ParallelClusterHeadNodePolicy")
    assert props["ManagedPolicyName"] == "parallelcluster-pc-p5-us-east-1-head"
    assert _s3_objects(props) == NODE_OBJECTS
    sids = [st.get("Sid") for st in statements(props)]
    assert "DataBucketRead" not in sids
    assert sorted(tuple(actions_of(st)) for st in statements(props) if st.get("Sid") is None) == [
        ("aps:RemoteWrite",), ("s3:GetObject",)]


def test_without_observability_the_actions_stay_and_the_head_node_writes_no_metrics(tmp_path):
    """The head node's OnNodeConfigured cannot be added or removed on a running cluster: it is always there, and
    the published settings say there are no collectors (so observability can be turned on by an update)."""
    from fmcluster.app import build_stacks

    spec = make_spec(observability={"enabled": False})
    stacks = build_stacks(spec, outdir=str(tmp_path))
    t = stacks.app.synth().get_stack_by_name("pc-test-cluster").template
    config = configuration(t)
    assert set(config["HeadNode"]["CustomActions"]) == {"OnNodeConfigured", "OnNodeUpdated"}
    head = policy(t, "ParallelClusterHeadNodePolicy")
    assert _s3_objects(head) == NODE_OBJECTS
    assert all("aps:RemoteWrite" not in actions_of(st) for st in statements(head))
    orchestration = stacks.cluster.node.find_child("ParallelCluster")
    settings = {k: v for k, v in orchestration.assets.settings.items() if k != "runtime"}
    assert settings == {"cluster": "pc-test", "remote_write_url": None, "scrape_interval": 30}


def test_policy_names_let_the_providers_default_role_attach_them(synth_example):
    for example in (P5, CB):
        for props in (p["Properties"] for p in resources_of(cluster_template(synth_example, example),
                                                              "AWS::IAM::ManagedPolicy").values()):
            assert props["ManagedPolicyName"].startswith("parallelcluster")


def _args(action: Dict[str, Any]) -> Dict[str, Any]:
    args = action["Args"]
    return {a: args[i + 1] for i, a in enumerate(args) if isinstance(a, str) and a.startswith("--")}


def test_every_queue_runs_the_validator_with_its_own_profile_holding_the_spec_level_and_policy(tmp_path):
    from fmcluster.app import build_stacks

    spec = load_spec(ROOT / "examples" / f"{P5}.yaml")
    stacks = build_stacks(spec, outdir=str(tmp_path))
    t = stacks.app.synth().get_stack_by_name("pc-p5-cluster").template
    config = configuration(t)
    bucket = assets_bucket(t)
    source = {"Fn::Join": ["", ["s3://", {"Ref": bucket}, "/fmcluster/"]]}
    assets = stacks.cluster.node.find_child("ParallelCluster").assets
    for group, q in zip(spec.node_groups, config["Scheduling"]["SlurmQueues"]):
        opts = _args(q["CustomActions"]["OnNodeConfigured"])
        # no level, policy or content hash in the queue: changing them would replace its nodes
        assert opts == {"--role": "compute", "--source": source, "--region": "us-east-1", "--node-group": group.name}
        profile = assets.profiles[group.name]
        assert profile == node_profile_json(spec, group)
        loaded = NodeProfile.from_json(profile)
        assert loaded.orchestrator == "slurm" and loaded.group == group.name and loaded.facts["vcpus"] == group.instance.vcpus
        assert loaded.policy == "report" and loaded.level == "standard"  # the example's
    head = config["HeadNode"]["CustomActions"]
    assert _args(head["OnNodeConfigured"]) == {"--role": "head", "--source": source, "--region": "us-east-1",
                                               "--node-group": "head-node"}
    updated = _args(head["OnNodeUpdated"])
    assert updated.pop("--event") == "updated" and updated.pop("--revision") == assets.revision
    assert updated == _args(head["OnNodeConfigured"])
    assert assets.settings["cluster"] == "pc-p5" and assets.settings["scrape_interval"] == 30
    runtime = assets.settings["runtime"]
    assert runtime["key"] == assets.runtime_key == f"runtime/{runtime['sha256']}.zip"


def test_the_configuration_names_no_content_hash(synth_example):
    """Every custom action names stable keys: no asset hash, no profile, no AMP URL in Script or Args (ParallelCluster
    cannot update the head node's OnNodeConfigured; a queue's change replaces its nodes). Only OnNodeUpdated carries
    the revision."""
    config = configuration(cluster_template(synth_example, P5))
    actions = [config["HeadNode"]["CustomActions"]["OnNodeConfigured"]] + [
        q["CustomActions"]["OnNodeConfigured"] for q in config["Scheduling"]["SlurmQueues"]]
    text = json.dumps(actions)
    assert not re.search(r"[0-9a-f]{16,}", text) and "remote_write" not in text and "ImportValue" not in text


def test_the_node_assets_bucket(synth_example):
    t = cluster_template(synth_example, P5)
    bucket_id = assets_bucket(t)
    bucket = t["Resources"][bucket_id]
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "AES256"}
    assert props["PublicAccessBlockConfiguration"] == {k: True for k in (
        "BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")}
    (rule,) = props["LifecycleConfiguration"]["Rules"]
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    (policy_doc,) = [p["Properties"]["PolicyDocument"] for p in resources_of(t, "AWS::S3::BucketPolicy").values()
                     if p["Properties"]["Bucket"] == {"Ref": bucket_id}]
    tls = [st for st in policy_doc["Statement"] if st["Effect"] == "Deny"]
    assert tls and tls[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    # deleted with the stack only after the cluster: the cluster depends on the contents and on the emptying
    assert bucket["DeletionPolicy"] == "Delete"
    cluster_id, cluster = cluster_resource(t)
    deployments = {v["Properties"]["DestinationBucketKeyPrefix"]: (k, v)
                   for k, v in resources_of(t, "Custom::CDKBucketDeployment").items()}
    deployment, contents = deployments["fmcluster/"]
    runtime_id, runtime = deployments["fmcluster/runtime/"]
    (emptier,) = resources_of(t, "Custom::S3AutoDeleteObjects")
    assert {deployment, emptier} <= set(cluster["DependsOn"])
    assert contents["Properties"]["DestinationBucketName"] == {"Ref": bucket_id}
    # runtimes are never pruned (a node that read older settings still finds its runtime), and settings.json is
    # written only after the runtime it names
    assert runtime["Properties"]["Prune"] is False and runtime_id in contents["DependsOn"]
    # and what the nodes wrote (their node reports) is never pruned either
    assert set(contents["Properties"]["Exclude"]) == {"runtime/*", "runtime.zip", "node-reports/*"}


def test_the_node_assets_bucket_logs_its_access_to_a_retained_log_bucket(synth_example):
    """S3 server access logs, delivered through a bucket policy for the logging service (S3 user guide, "Enabling
    Amazon S3 server access logging"), like the data and lifecycle buckets."""
    t = cluster_template(synth_example, P5)
    bucket_id = assets_bucket(t)
    logging = t["Resources"][bucket_id]["Properties"]["LoggingConfiguration"]
    log_bucket_id = logging["DestinationBucketName"]["Ref"]
    assert logging["LogFilePrefix"] == "node-assets/"
    assert t["Resources"][log_bucket_id]["DeletionPolicy"] == "Retain"
    (log_policy,) = [p["Properties"]["PolicyDocument"] for p in resources_of(t, "AWS::S3::BucketPolicy").values()
                     if p["Properties"]["Bucket"] == {"Ref": log_bucket_id}]
    (delivery,) = [st for st in log_policy["Statement"]
                   if st.get("Principal") == {"Service": "logging.s3.amazonaws.com"}]
    assert delivery["Action"] == "s3:PutObject"
    assert delivery["Condition"]["ArnLike"]["aws:SourceArn"] == {"Fn::GetAtt": [bucket_id, "Arn"]}


def test_the_runtime_is_one_deterministic_archive_carrying_this_kinds_node_folder():
    from fmcluster.constructs.node_bootstrap import runtime_zip

    first = runtime_zip()
    assert first == runtime_zip()
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(first)).namelist()
    assert "orchestrators/parallelcluster/node/on_node_configured.sh" in names and "catalog.json" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


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


def test_script_and_assets_props_and_grant(stack):
    from fmcluster.orchestrators.parallelcluster.assets import NodeAssets

    with pytest.raises(ValueError, match="^profiles:"):
        NodeAssets(stack, "Bad", settings={}, profiles={"a/b": "{}"})
    assets = NodeAssets(stack, "Assets", settings={"cluster": "c"}, profiles={"g": "{}"})
    with pytest.raises(ValueError, match="^region:"):
        OnNodeConfiguredScript(stack, "A", assets=assets, region="us east 1")
    s = OnNodeConfiguredScript(stack, "C", assets=assets, region="us-east-1")
    with pytest.raises(ValueError, match="^node_group:"):
        s.compute_action(node_group="other")
    with pytest.raises(ValueError, match="^node_group:"):
        s.head_action(node_group="two words")
    p = NodePolicy(stack, "P", name="parallelcluster-p")
    with pytest.raises(ValueError, match="^profiles:"):
        assets.grant_read(p, profiles=["other"])
    grant = assets.grant_read(p, profiles=["g"])
    assert isinstance(grant, iam.Grant) and grant.success


def test_a_groups_object_carries_the_settings_and_the_profile_of_one_deployment():
    """What on_node_configured.sh reads on a compute node (test_pc_node_script: the node checks schema and group)."""
    from fmcluster.orchestrators.parallelcluster.assets import group_document

    settings = {"cluster": "pc-p5", "runtime": {"key": "runtime/" + "a" * 64 + ".zip", "sha256": "a" * 64}}
    doc = group_document("h100", settings, json.dumps({"group": "h100", "level": "standard", "policy": "fail"}))
    assert doc == {"schema": 1, "group": "h100", "settings": settings,
                   "profile": {"group": "h100", "level": "standard", "policy": "fail"}}

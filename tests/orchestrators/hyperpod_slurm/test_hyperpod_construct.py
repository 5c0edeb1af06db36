"""HyperPod Slurm constructs: one small app (synthesized once for the module) with the
lifecycle bucket, the instance role and a cluster of controller + login + two GPU groups;
template assertions, cdk-nag, cfn-lint, and SageMaker's CreateCluster (moto) fed with the
synthesized instance groups."""

from __future__ import annotations

import json
import re
from typing import Any, Dict

import pytest
from helpers import actions_of, policy_statements, resources_of

ACCOUNT, REGION = "123456789012", "us-east-1"
PLAN_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/p5-plan"
SUBNET, SG = "subnet-0123456789abcdef0", "sg-0123456789abcdef0"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2
    from cdk_nag import AwsSolutionsChecks

    from fmcluster.app import new_app
    from fmcluster.nag import cdk_provider_handlers, cfn_lint_ignore
    from fmcluster.platforms.hyperpod.cluster import HyperPodInstanceGroup, HyperPodSlurmCluster
    from fmcluster.platforms.hyperpod.instance_role import HyperPodInstanceRole
    from fmcluster.platforms.hyperpod.lifecycle import LifecycleScripts

    outdir = tmp_path_factory.mktemp("hyperpod")
    app = new_app(outdir=str(outdir), nag=False)  # the context build_app uses; cdk-nag is added below
    stack = cdk.Stack(app, "hp-cluster", env=cdk.Environment(account=ACCOUNT, region=REGION))
    subnet = ec2.Subnet.from_subnet_id(stack, "Subnet", SUBNET)
    sg = ec2.SecurityGroup.from_security_group_id(stack, "Sg", SG, mutable=False)
    fsx_dns = cdk.Fn.import_value("demo-storage-FsxDns")  # a token from another stack
    lifecycle = LifecycleScripts(
        stack,
        "Lifecycle",
        cluster_name="demo",
        entries={f"on_init_complete.{g}.sh": g for g in ("controller", "login", "gpu", "gpu-plan")},
        parameters={"version": "1.0.0", "fsx_dns_name": fsx_dns, "controller_group": "controller"},
        profiles={"gpu": json.dumps({"gpus": 8}), "gpu-plan": json.dumps({"gpus": 8})},
    )
    role = HyperPodInstanceRole(stack, "Nodes", cluster_name="demo", subnets=[subnet], security_groups=[sg])
    groups = [
        HyperPodInstanceGroup(name="controller", instance_type="ml.m5.2xlarge", count=1, node_type="Controller",
                              entry_script="on_init_complete.controller.sh"),
        HyperPodInstanceGroup(name="login", instance_type="ml.m5.xlarge", count=1, node_type="Login", threads_per_core=2,
                              entry_script="on_init_complete.login.sh"),
        HyperPodInstanceGroup(
            name="gpu", instance_type="ml.p5.48xlarge", count=2, partitions=("gpu",), ebs_volume_gib=500, deep_health_checks=True,
            entry_script="on_init_complete.gpu.sh",
        ),
        HyperPodInstanceGroup(
            name="gpu-plan", instance_type="ml.p5.48xlarge", count=1, partitions=("plan",), training_plan_arn=PLAN_ARN,
            entry_script="on_init_complete.gpu-plan.sh",
        ),
    ]
    cluster = HyperPodSlurmCluster(
        stack,
        "Cluster",
        cluster_name="demo",
        instance_groups=groups,
        role=role,
        lifecycle=lifecycle,
        subnets=[subnet],
        security_groups=[sg],
    )
    cdk.CfnOutput(stack, "ControllerSsmTarget", value=cluster.ssm_target("controller", ""))
    for handler in cdk_provider_handlers(stack):
        cfn_lint_ignore(handler, ["W3005"], "CDK custom resource provider: DependsOn its role as well as GetAtt")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
        nag_error = None
    except RuntimeError as e:  # cdk-nag finding without acknowledgment
        nag_error = str(e)
        report = outdir / "validation-report.json"
        if report.exists():
            nag_error += "\n" + "\n".join(
                v["ruleName"] + " " + str([c["constructPath"] for c in v["violatingConstructs"]])
                for p in json.loads(report.read_text())["pluginReports"]
                for v in p["violations"]
            )
    template = json.loads((outdir / "hp-cluster.template.json").read_text()) if nag_error is None else {}
    return {"template": template, "nag_error": nag_error, "cluster": cluster, "stack": stack}


@pytest.fixture(scope="module")
def template(built) -> Dict[str, Any]:
    assert built["nag_error"] is None, built["nag_error"]
    return built["template"]


def the(template, type_):
    found = resources_of(template, type_)
    assert len(found) == 1, f"{type_}: {sorted(found)}"
    return next(iter(found.items()))


def test_cdk_nag_reports_nothing_unacknowledged(built):
    assert built["nag_error"] is None, built["nag_error"]


def test_cluster_instance_groups(template):
    from aws_cdk.assertions import Match, Template

    t = Template.from_json(template)
    t.has_resource_properties(
        "AWS::SageMaker::Cluster",
        {
            "ClusterName": "demo",
            "NodeRecovery": "Automatic",
            "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}},
            "VpcConfig": {"Subnets": [SUBNET], "SecurityGroupIds": [SG]},
            "InstanceGroups": [
                Match.object_equals(
                    {
                        "InstanceGroupName": "controller",
                        "InstanceType": "ml.m5.2xlarge",
                        "InstanceCount": 1,
                        "ThreadsPerCore": 1,
                        "ExecutionRole": Match.any_value(),
                        "LifeCycleConfig": Match.any_value(),
                        "SlurmConfig": {"NodeType": "Controller"},
                    }
                ),
                Match.object_like(
                    {"InstanceGroupName": "login", "ThreadsPerCore": 2, "SlurmConfig": {"NodeType": "Login"}}
                ),
                Match.object_like(
                    {
                        "InstanceGroupName": "gpu",
                        "InstanceType": "ml.p5.48xlarge",
                        "InstanceCount": 2,
                        "ThreadsPerCore": 1,
                        "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
                        "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
                        "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
                    }
                ),
                Match.object_like(
                    {
                        "InstanceGroupName": "gpu-plan",
                        "TrainingPlanArn": PLAN_ARN,
                        "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["plan"]},
                    }
                ),
            ],
        },
    )
    _, cluster = the(template, "AWS::SageMaker::Cluster")
    groups = cluster["Properties"]["InstanceGroups"]
    assert "TrainingPlanArn" not in groups[2] and "OnStartDeepHealthChecks" not in groups[3]
    assert "InstanceStorageConfigs" not in groups[3]


def test_lifecycle_config_points_at_the_sagemaker_bucket(template):
    _, cluster = the(template, "AWS::SageMaker::Cluster")
    bucket_name = f"sagemaker-demo-{ACCOUNT}-{REGION}"
    for group in cluster["Properties"]["InstanceGroups"]:
        assert group["LifeCycleConfig"] == {"SourceS3Uri": f"s3://{bucket_name}/lifecycle/",
                                          "OnInitComplete": f"on_init_complete.{group['InstanceGroupName']}.sh"}
    buckets = {b["Properties"].get("BucketName") for b in resources_of(template, "AWS::S3::Bucket").values()}
    assert bucket_name in buckets and len(bucket_name) <= 63


def test_cluster_waits_for_scripts_and_role_policy(template):
    _, cluster = the(template, "AWS::SageMaker::Cluster")
    depends = set(cluster["DependsOn"])
    deployments = set(resources_of(template, "Custom::CDKBucketDeployment"))
    assert len(deployments) == 3 and deployments <= depends
    policies = set(resources_of(template, "AWS::IAM::Policy"))
    role_logical = cluster["Properties"]["InstanceGroups"][0]["ExecutionRole"]["Fn::GetAtt"][0]
    assert any(p.startswith(role_logical.rstrip("0123456789ABCDEF")) and p in depends for p in policies)


def test_deployments_write_fixed_entries_and_keep_every_runtime(template):
    deployments = resources_of(template, "Custom::CDKBucketDeployment")
    by_prefix = {d["Properties"]["DestinationBucketKeyPrefix"]: d for d in deployments.values()}
    assert set(by_prefix) == {"lifecycle/", "boot/groups/", "runtime/"}
    scripts, pointers, runtime = (by_prefix[k] for k in ("lifecycle/", "boot/groups/", "runtime/"))
    assert len(scripts["Properties"]["SourceObjectKeys"]) == 4  # one entry per instance group, nothing else
    assert len(pointers["Properties"]["SourceObjectKeys"]) == 4  # one pointer per instance group
    assert len(runtime["Properties"]["SourceObjectKeys"]) == 1
    # runtimes and pointers are never pruned: a node may still be about to read what an older deploy wrote
    assert runtime["Properties"]["Prune"] is False and pointers["Properties"]["Prune"] is False
    # the FSx DNS token from another stack is substituted at deploy time, in the pointers
    assert any("Fn::ImportValue" in json.dumps(m) for m in pointers["Properties"].get("SourceMarkers", []))
    # a pointer never names a runtime that is not there yet; HyperPod finds no entry before its pointer
    names = {id(d): n for n, d in deployments.items()}
    assert names[id(runtime)] in pointers["DependsOn"] and names[id(pointers)] in scripts["DependsOn"]


def test_lifecycle_files_have_the_contents_asked_for(built):
    """Source.data / json_data write their files as assets in the cloud assembly."""
    import glob
    import os
    import zipfile

    from fmcluster.constructs import node_bootstrap
    from fmcluster.constructs.runtime_archive import sha256_of

    outdir = built["stack"].node.root.outdir
    names: Dict[str, bytes] = {}
    for z in glob.glob(os.path.join(outdir, "asset.*.zip")):
        with zipfile.ZipFile(z) as f:
            for n in f.namelist():
                names[n] = f.read(n)
    for d in glob.glob(os.path.join(outdir, "asset.*")):
        if os.path.isdir(d):
            for fn in os.listdir(d):
                names.setdefault(fn, open(os.path.join(d, fn), "rb").read())
    digest = sha256_of(node_bootstrap.runtime_zip())
    assert sha256_of(names[f"{digest}.zip"]) == digest, "the runtime object is named by its own sha256"
    entry = names["on_init_complete.gpu.sh"].decode()
    assert entry.startswith("#!/bin/bash\n") and "fm_group=gpu " in entry and "fm_pointer=boot/groups/gpu.json" in entry
    assert 'runtime/platforms/hyperpod/node/on_init_complete.sh" --group "$fm_group" "$@"' in entry
    # a deploy-time value (the FSx DNS name from another stack) is a marker the deployment replaces with its JSON
    text = names["gpu.json"].decode()
    assert "<<marker:" in text
    pointer = json.loads(re.sub(r"<<marker:[^>]*>>", '"token"', text))
    assert pointer["profile"] == {"gpus": 8} and pointer["group"] == "gpu"
    assert pointer["runtime"] == {"key": f"runtime/{digest}.zip", "sha256": digest}
    assert pointer["parameters"]["controller_group"] == "controller"
    # CDK's json_data drops a null: a group without boot validation has no profile in its pointer
    controller = json.loads(re.sub(r"<<marker:[^>]*>>", '"token"', names["controller.json"].decode()))
    assert controller["group"] == "controller" and controller.get("profile") is None


def test_lifecycle_bucket_is_private_encrypted_tls_only_versioned_logged(template):
    from aws_cdk.assertions import Match, Template

    t = Template.from_json(template)
    t.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {
                    "BucketName": f"sagemaker-demo-{ACCOUNT}-{REGION}",
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
                    },
                    "PublicAccessBlockConfiguration": {
                        "BlockPublicAcls": True,
                        "BlockPublicPolicy": True,
                        "IgnorePublicAcls": True,
                        "RestrictPublicBuckets": True,
                    },
                    "VersioningConfiguration": {"Status": "Enabled"},
                    "LoggingConfiguration": {"DestinationBucketName": Match.any_value(), "LogFilePrefix": "demo/"},
                }
            ),
            "DeletionPolicy": "Delete",
        },
    )
    for name, bucket in resources_of(template, "AWS::S3::Bucket").items():
        policy = next(
            p for p in resources_of(template, "AWS::S3::BucketPolicy").values() if p["Properties"]["Bucket"] == {"Ref": name}
        )
        deny = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert deny and deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}, name
        assert bucket["Properties"]["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] is True
    assert resources_of(template, "Custom::S3AutoDeleteObjects"), "the lifecycle bucket is emptied on stack delete"


def test_no_wildcard_actions_in_allow_statements(template):
    for st in policy_statements(template):
        if st.get("Effect") == "Allow":
            for action in actions_of(st):
                assert "*" not in action, f"wildcard action {action}: {st}"


def test_instance_role_has_the_managed_policy_hyperpod_requires_and_inline_only_what_it_lacks(template):
    roles = resources_of(template, "AWS::IAM::Role")
    role_name, role = next(
        (k, v)
        for k, v in roles.items()
        if v["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    )
    # attached, not copied: an inline copy falls behind when AWS updates the policy for new HyperPod agents
    (managed,) = role["Properties"]["ManagedPolicyArns"]
    assert managed["Fn::Join"][1][-1] == ":iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"
    policies = resources_of(template, "AWS::IAM::Policy").values()
    policy = next(p for p in policies if {"Ref": role_name} in p["Properties"]["Roles"])
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    text = json.dumps(statements)
    assert f"subnet/{SUBNET}" in text and f"security-group/{SG}" in text
    inline = {a for s in statements for a in actions_of(s)}
    assert not inline & {"logs:CreateLogGroup", "logs:PutLogEvents", "cloudwatch:PutMetricData",
                         "ssmmessages:CreateControlChannel"}, "the managed policy grants these"
    star = {a for s in statements if s["Resource"] == "*" for a in actions_of(s)}
    assert star <= {
        "ec2:DeleteNetworkInterfacePermission",
        "ec2:DescribeDhcpOptions",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeSubnets",
        "ec2:DescribeVpcs",
    }, star
    lists = [s for s in statements if "s3:ListBucket" in actions_of(s)]
    assert lists and all(s["Condition"]["StringLike"]["s3:prefix"] == ["lifecycle/", "lifecycle/*"] for s in lists)
    (reads,) = [s for s in statements if actions_of(s) == ["s3:GetObject"]]
    objects = sorted(json.dumps(r).split("/", 1)[1].rstrip('"]}') for r in reads["Resource"])
    assert objects == ["boot/groups/controller.json", "boot/groups/gpu-plan.json", "boot/groups/gpu.json",
                       "boot/groups/login.json", "lifecycle/*", "runtime/*"], objects


def test_every_log_group_is_encrypted_with_a_customer_managed_key(template):
    groups = resources_of(template, "AWS::Logs::LogGroup")
    assert groups and all("KmsKeyId" in g["Properties"] for g in groups.values()), groups


def test_ssm_target_output(template):
    out = template["Outputs"]["ControllerSsmTarget"]["Value"]
    joined = out["Fn::Join"][1]
    assert joined[0] == "sagemaker-cluster:" and joined[-1] == "_controller-"
    assert "Fn::Select" in joined[1] and joined[1]["Fn::Select"][0] == 1


def test_cfn_lint_reports_nothing(template):
    from helpers.lint import cfn_lint

    assert cfn_lint(template, REGION) == []


def _resolve(value: Any, template: Dict[str, Any]) -> Any:
    """CloudFormation intrinsics in the cluster's properties → fake literal values."""
    fake = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": "aws"}
    if isinstance(value, list):
        return [_resolve(v, template) for v in value]
    if isinstance(value, dict):
        if "Ref" in value:
            return fake.get(value["Ref"], template["Resources"].get(value["Ref"], {}).get("Properties", {}).get("BucketName"))
        if "Fn::GetAtt" in value:
            logical, attr = value["Fn::GetAtt"]
            assert attr == "Arn", value
            return f"arn:aws:iam::{ACCOUNT}:role/{logical}"
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(str(_resolve(p, template)) for p in parts)
        return {k: _resolve(v, template) for k, v in value.items()}
    return value


def test_sagemaker_accepts_the_synthesized_cluster(template):
    import boto3
    from moto import mock_aws

    _, cluster = the(template, "AWS::SageMaker::Cluster")
    props = _resolve(cluster["Properties"], template)
    with mock_aws():
        client = boto3.client("sagemaker", region_name=REGION)
        arn = client.create_cluster(
            ClusterName=props["ClusterName"],
            InstanceGroups=props["InstanceGroups"],
            VpcConfig=props["VpcConfig"],
            Orchestrator=props["Orchestrator"],
            NodeRecovery=props["NodeRecovery"],
        )["ClusterArn"]
        assert arn.endswith("/" + arn.split("/")[-1])
        nodes = client.list_cluster_nodes(ClusterName="demo")["ClusterNodeSummaries"]
        per_group: Dict[str, int] = {}
        for node in nodes:
            per_group[node["InstanceGroupName"]] = per_group.get(node["InstanceGroupName"], 0) + 1
        assert per_group == {"controller": 1, "login": 1, "gpu": 2, "gpu-plan": 1}


def test_invariants_fail_with_clear_messages():
    import aws_cdk as cdk

    from fmcluster.app import new_app
    from fmcluster.platforms.hyperpod.cluster import HyperPodInstanceGroup, HyperPodSlurmCluster
    from fmcluster.platforms.hyperpod.instance_role import HyperPodInstanceRole
    from fmcluster.platforms.hyperpod.lifecycle import LifecycleScripts

    stack = cdk.Stack(new_app(nag=False), "s", env=cdk.Environment(account=ACCOUNT, region=REGION))
    life = LifecycleScripts(stack, "L", cluster_name="x", entries={"on_init_complete.sh": "gpu"}, parameters={},
                            profiles={})
    role = HyperPodInstanceRole(stack, "R", cluster_name="x", subnets=[SUBNET], security_groups=[SG])
    compute = HyperPodInstanceGroup(name="gpu", instance_type="ml.p5.48xlarge", count=1)

    def make(groups, i=[0]):  # noqa: B006
        i[0] += 1
        return HyperPodSlurmCluster(
            stack, f"C{i[0]}", cluster_name="x", instance_groups=groups, role=role, lifecycle=life,
            subnets=[SUBNET], security_groups=[SG],
        )

    with pytest.raises(ValueError, match="exactly one Controller"):
        make([compute])
    ctl = HyperPodInstanceGroup(name="ctl", instance_type="ml.m5.xlarge", count=1, node_type="Controller")
    with pytest.raises(ValueError, match="exactly one Controller"):
        make([ctl, HyperPodInstanceGroup(name="ctl2", instance_type="ml.m5.xlarge", count=1, node_type="Controller"), compute])
    with pytest.raises(ValueError, match="must start with 'ml.'"):
        make([ctl, HyperPodInstanceGroup(name="g", instance_type="p5.48xlarge", count=1)])
    with pytest.raises(ValueError, match="only Compute groups have partitions"):
        make([HyperPodInstanceGroup(name="c", instance_type="ml.m5.xlarge", count=1, node_type="Controller", partitions=("p",)),
              compute])
    with pytest.raises(ValueError, match="unique"):
        make([ctl, compute, compute])
    with pytest.raises(ValueError, match="threads_per_core"):
        make([ctl, HyperPodInstanceGroup(name="g", instance_type="ml.p5.48xlarge", count=1, threads_per_core=4)])
    with pytest.raises(ValueError, match="lifecycle bucket name embeds it"):
        LifecycleScripts(stack, "Long", cluster_name="a" * 26, entries={"on_init_complete.sh": "gpu"}, parameters={},
                         profiles={})

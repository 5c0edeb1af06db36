"""orchestrator: hyperpod-slurm, from the spec to AWS::SageMaker::Cluster, its role and lifecycle scripts."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict

import pytest
from helpers import policy_statements, resources_of

from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError

ACCOUNT, REGION = "123456789012", "us-east-1"


@pytest.fixture(scope="module")
def p5(synth_example) -> Dict[str, Any]:
    return synth_example("hyperpod-slurm-p5")["hp-p5-cluster"]


@pytest.fixture(scope="module")
def b200(synth_example) -> Dict[str, Any]:
    return synth_example("hyperpod-p6-b200-training-plan")["hp-b200-cluster"]


def cluster_of(template: Dict[str, Any]) -> Dict[str, Any]:
    (cluster,) = resources_of(template, "AWS::SageMaker::Cluster").values()
    return cluster


def groups_of(template: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in cluster_of(template)["Properties"]["InstanceGroups"]}


def test_one_controller_login_nodes_and_a_partition_per_node_group(p5):
    groups = groups_of(p5)
    assert list(groups) == ["controller", "login", "h100"]
    assert groups["controller"]["SlurmConfig"] == {"NodeType": "Controller"}
    assert (groups["controller"]["InstanceType"], groups["controller"]["InstanceCount"]) == ("ml.m5.12xlarge", 1)
    assert groups["login"]["SlurmConfig"] == {"NodeType": "Login"} and groups["login"]["InstanceCount"] == 2
    h100 = groups["h100"]
    assert h100["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["h100"]}
    assert (h100["InstanceType"], h100["InstanceCount"]) == ("ml.p5.48xlarge", 4)


def test_gpu_groups_get_deep_health_checks_and_efa_only_interfaces(p5):
    groups = groups_of(p5)
    assert groups["h100"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert groups["h100"]["NetworkInterface"] == {"InterfaceType": "efa-only"}
    for name in ("controller", "login"):
        assert "OnStartDeepHealthChecks" not in groups[name] and "NetworkInterface" not in groups[name]


def test_every_group_has_threads_storage_lifecycle_and_the_role(p5):
    for name, g in groups_of(p5).items():
        assert g["ThreadsPerCore"] == 1
        ebs, fsx = g["InstanceStorageConfigs"]
        assert ebs == {"EbsVolumeConfig": {"VolumeSizeInGB": 500}}
        assert fsx["FsxLustreConfig"]["MountPath"] == "/fsx" and "Fn::ImportValue" in str(fsx["FsxLustreConfig"]["DnsName"])
        # each group's own entry script names the group: a node never depends on resource_config.json to know it
        assert g["LifeCycleConfig"]["OnInitComplete"] == f"on_init_complete.{name}.sh"
        uri = g["LifeCycleConfig"]["SourceS3Uri"]["Fn::Join"][1]
        assert uri[0] == "s3://sagemaker-hp-p5-" and uri[-1] == "-us-east-1/lifecycle/"
        assert g["ExecutionRole"]["Fn::GetAtt"][0].startswith("HyperPodInstanceRole")


def test_cluster_settings_vpc_and_ordering(p5):
    cluster = cluster_of(p5)
    props = cluster["Properties"]
    assert props["ClusterName"] == "hp-p5"
    assert props["NodeRecovery"] == "Automatic"
    assert props["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    vpc = json.dumps(props["VpcConfig"])
    assert "EfaSecurityGroup" in vpc and "VpcNodesSubnet" in vpc
    depends = cluster["DependsOn"]
    assert any("LifecycleScriptsCustomResource" in d for d in depends)
    assert any("LifecycleRuntimeCustomResource" in d for d in depends)
    assert any("InstanceRoleDefaultPolicy" in d for d in depends)


def test_slurm_clusters_are_provisioned_all_or_nothing(p5, b200):
    # NodeProvisioningMode Continuous "is only supported for EKS orchestrated clusters" (CreateCluster API
    # reference): a Slurm cluster leaves it out and HyperPod provisions every instance or rolls the creation back
    for template in (p5, b200):
        assert "NodeProvisioningMode" not in cluster_of(template)["Properties"]


def test_training_plan_group_uses_the_plan(b200):
    g = groups_of(b200)["b200"]
    assert g["TrainingPlanArn"] == "arn:aws:sagemaker:us-west-2:123456789012:training-plan/b200-march"
    assert g["InstanceType"] == "ml.p6-b200.48xlarge"


def test_no_launch_templates_placement_groups_or_ec2_node_role(p5):
    for type_ in ("AWS::EC2::LaunchTemplate", "AWS::EC2::PlacementGroup", "AWS::IAM::InstanceProfile"):
        assert not resources_of(p5, type_), type_


def test_outputs_name_the_cluster_and_the_controller_ssm_target(p5):
    outputs = p5["Outputs"]
    assert outputs["HyperPodClusterName"]["Value"] == "hp-p5"
    assert "ClusterArn" in json.dumps(outputs["HyperPodClusterArn"])
    target = json.dumps(outputs["ControllerSsmTarget"]["Value"])
    assert "sagemaker-cluster:" in target and "_controller-" in target
    assert "aws ssm start-session" in outputs["ControllerSsmTarget"]["Description"]


def test_instance_role_reaches_data_bucket_and_prometheus_without_wildcard_actions(p5):
    (role_id,) = [k for k in resources_of(p5, "AWS::IAM::Role") if k.startswith("HyperPodInstanceRole")]
    policy = next(p for p in resources_of(p5, "AWS::IAM::Policy").values()
                  if {"Ref": role_id} in p["Properties"]["Roles"])
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert {"s3:GetObject", "s3:PutObject", "kms:GenerateDataKey", "aps:RemoteWrite"} <= actions
    assert "hp-p5-storage-DataBucketArn" in json.dumps(statements)
    for st in policy_statements(p5):
        if st.get("Effect") == "Allow":
            acts = [st["Action"]] if isinstance(st["Action"], str) else st["Action"]
            assert not [a for a in acts if "*" in a], st


def test_lifecycle_parameters_carry_groups_fsx_validation_and_collectors():
    from helpers.storage import fsx_mounts

    from fmcluster.orchestrators.hyperpod_slurm.construct import lifecycle_parameters
    from fmcluster.registry import load_spec

    spec = load_spec("examples/hyperpod-slurm-p5.yaml")
    fsx = {"dns_name": "fs-0abc.fsx.us-east-1.amazonaws.com", "mount_name": "abcdefgh", "mount_point": "/fsx",
           "efa": True}
    params = lifecycle_parameters(spec, REGION, fsx_mounts(**fsx), "https://aps-workspaces.example/api/v1/remote_write")
    assert params["version"] == 1 and params["workload_manager"] == "slurm"
    assert (params["controller_group"], params["login_group"]) == ("controller", "login")
    assert params["worker_groups"] == [{"instance_group_name": "h100", "partition_name": "h100",
                                        "instance_type": "ml.p5.48xlarge", "gpu": True, "efa": True}]
    assert params["fsx"] == fsx
    assert params["validation"] == {"level": "standard", "policy": "drain"}
    assert params["observability"]["scrape_interval_seconds"] == 30
    assert params["observability"]["gpu_job_map"] is True  # the example is a new cluster: every node gets the hooks
    assert params["users"] == [{"name": "ml", "uid": 2001, "groups": ["docker"], "ssh_public_keys": []}]
    # the lifecycle scripts accept exactly this document
    from fmcluster.runtime.node_setup import parameters

    assert parameters.validate_params(json.loads(json.dumps(params)))["controller_group"] == "controller"


def test_the_lifecycle_parameters_name_the_file_system_only_when_the_lifecycle_mounts_it(p5, b200):
    def markers(template):
        (scripts,) = [r for k, r in resources_of(template, "Custom::CDKBucketDeployment").items() if "Pointers" in k]
        return json.dumps(scripts["Properties"].get("SourceMarkers", []))

    assert "FileSystem" not in markers(p5)  # HyperPod mounts it (FsxLustreConfig)
    assert "hp-p5-storage-MountpointBucketName" in markers(p5), "the nodes mount Mountpoint's bucket (the list)"
    assert "hp-b200-storage" in markers(b200) and "FileSystem" in markers(b200)  # EFA-enabled: the lifecycle does


def _resolve(value: Any) -> Any:
    """Intrinsics in the synthesized cluster → the literals CloudFormation would pass to CreateCluster."""
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    if isinstance(value, dict):
        if value.get("Ref") == "AWS::AccountId":
            return ACCOUNT
        if "Fn::GetAtt" in value:
            return f"arn:aws:iam::{ACCOUNT}:role/{value['Fn::GetAtt'][0]}"
        if "Fn::ImportValue" in value:
            return "sg-0123456789abcdef0" if "SecurityGroup" in value["Fn::ImportValue"] else "subnet-0123456789abcdef0"
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(str(_resolve(p)) for p in parts)
        return {k: _resolve(v) for k, v in value.items()}
    return value


def test_sagemaker_creates_the_synthesized_cluster_and_lists_its_nodes(p5):
    import boto3
    from moto import mock_aws

    props = _resolve(cluster_of(p5)["Properties"])
    with mock_aws():
        client = boto3.client("sagemaker", region_name=REGION)
        client.create_cluster(**{k: props[k] for k in ("ClusterName", "InstanceGroups", "VpcConfig", "Orchestrator",
                                                        "NodeRecovery")})
        nodes = client.list_cluster_nodes(ClusterName="hp-p5")["ClusterNodeSummaries"]
    per_group: Dict[str, int] = {}
    for n in nodes:
        per_group[n["InstanceGroupName"]] = per_group.get(n["InstanceGroupName"], 0) + 1
    assert per_group == {"controller": 1, "login": 2, "h100": 4}


# --- spec checks ------------------------------------------------------------------------------

BASE: Dict[str, Any] = {
    "name": "hp-test",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "orchestrator": {"type": "hyperpod-slurm"},
    "node_groups": [{"name": "gpu", "instance_type": "ml.p5.48xlarge", "count": 2}],
}


def hp(group: Dict[str, Any] = None, **settings: Any) -> Dict[str, Any]:  # type: ignore[assignment]
    data = copy.deepcopy(BASE)
    if group:
        data["node_groups"][0].update(group)
    if settings:
        data["orchestrator"]["hyperpod"] = settings
    return data


def test_defaults():
    spec = parse_spec(BASE)
    s = spec.orchestrator.hyperpod
    assert spec.orchestrator_kind.name == "hyperpod-slurm" and spec.orchestrator_kind.nodes.agent == "slurm"
    assert (s.controller_instance_type, s.login_instance_type, s.threads_per_core) == ("ml.m5.12xlarge", None, 1)
    assert s.node_recovery == "Automatic" and s.deep_health_checks and s.slurm_config_strategy == "Managed"


@pytest.mark.parametrize(
    "data, path, words",
    [
        (hp(threads_per_core=4), "orchestrator.hyperpod.threads_per_core", "1 (hyperthreading off) or 2"),
        (hp(controller_instance_type="ml.m5.13xlarge"), "orchestrator.hyperpod.controller_instance_type",
         "not a SageMaker HyperPod instance type; m5 sizes it offers"),
        (hp(login_instance_type="t2.micro"), "orchestrator.hyperpod.login_instance_type", "ml.t2.micro is not"),
        (hp(login_count=2), "orchestrator.hyperpod.login_count", "applies with login_instance_type"),
        (hp(node_recovery="Sometimes"), "orchestrator.hyperpod.node_recovery", "'Automatic' or 'None'"),
        (hp(users=[{"name": "a", "uid": 2001}, {"name": "b", "uid": 2001}]), "orchestrator.hyperpod.users[1].uid",
         "used by another user"),
        (hp(users=[{"name": "root", "uid": 0}]), "orchestrator.hyperpod.users[0].uid", "greater than or equal to 2000"),
        (hp({"name": "controller"}), "node_groups[0].name", "HyperPod controller group's name"),
        (hp({"name": "login"}), "node_groups[0].name", "HyperPod login group's name"),
        (hp({"capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}),
         "node_groups[0].capacity.type", "takes on-demand, training-plan, not capacity-block"),
        (hp({"ami_id": "ami-0123456789abcdef0", "image_family": "dlami-ubuntu-22.04"}), "node_groups[0].ami_id",
         "own DLAMI-based image"),
        (hp({"placement": {"strategy": "cluster"}}), "node_groups[0].placement", "places instances itself"),
        (dict(BASE, orchestrator={"type": "pcs", "hyperpod": {}}), "orchestrator.hyperpod",
         "applies to orchestrator type hyperpod-slurm"),
        (dict(BASE, orchestrator={"type": "slurm"}), "orchestrator.type",
         "'slurm' is not allowed; allowed: none, pcs, hyperpod-slurm"),
    ],
)
def test_hyperpod_mistakes_name_their_field(data, path, words):
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    assert any(p.startswith(f"{path}:") and words in p for p in e.value.problems), e.value.problems


def test_a_node_group_type_hyperpod_does_not_offer_is_refused(monkeypatch):
    """Every type in today's catalog is a HyperPod type; the check guards the next one added."""
    import fmcluster.platforms.hyperpod.settings as sh

    offered = sh.hyperpod_instance_types() - {"ml.p5.4xlarge"}
    monkeypatch.setattr(sh, "hyperpod_instance_types", lambda: offered)
    with pytest.raises(SpecError) as e:
        parse_spec(hp({"instance_type": "p5.4xlarge"}))
    assert any(p.startswith("node_groups[0].instance_type: ml.p5.4xlarge is not a SageMaker HyperPod instance type; "
                            "p5 sizes it offers: ml.p5.48xlarge") for p in e.value.problems), e.value.problems


def test_training_plan_capacity_is_accepted_with_hyperpod_only():
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-june"
    group = {"capacity": {"type": "training-plan", "training_plan_arn": arn}}
    assert parse_spec(hp(group)).node_groups[0].capacity.training_plan_arn == arn
    pcs = hp(group)
    pcs["orchestrator"] = {"type": "pcs"}
    with pytest.raises(SpecError) as e:
        parse_spec(pcs)
    assert any(p.startswith("node_groups[0].capacity.type:") for p in e.value.problems)


def test_hyperpod_starts_slurm_and_mounts_fsx_before_our_script_runs(p5):
    """With OnCreate, "HyperPod does not run AMI-based configuration and does not start Slurm" and leaves FSx to the
    scripts (AWS, "Getting started with the AWS CLI (Slurm)"): every group must use OnInitComplete, and exactly one
    side mounts the file system."""
    groups = groups_of(p5)
    assert all("OnCreate" not in g["LifeCycleConfig"] for g in groups.values())
    assert all(any("FsxLustreConfig" in c for c in g["InstanceStorageConfigs"]) for g in groups.values())


def lifecycle_markers(cluster: Dict[str, Any]) -> str:
    """What the lifecycle parameters take from other stacks (deploy-time markers of the deployment that writes the
    groups' pointers, which carry the parameters)."""
    (pointers,) = [r for n, r in cluster["Resources"].items()
                   if r["Type"] == "Custom::CDKBucketDeployment" and n.startswith("HyperPodLifecyclePointers")]
    return json.dumps(pointers["Properties"].get("SourceMarkers", []))


@pytest.mark.parametrize("example, lifecycle_mounts", [("hyperpod-slurm-p5", False),
                                                      ("hyperpod-p6-b200-training-plan", True)])
def test_exactly_one_side_mounts_the_file_system(synth_example, example, lifecycle_mounts):
    """A TCP file system is HyperPod's to mount (InstanceStorageConfigs) and the lifecycle parameters never name it;
    an EFA-enabled one (LNet over EFA) is the lifecycle's, and HyperPod is given none."""
    cluster = next(t for n, t in synth_example(example).items() if n.endswith("-cluster"))
    (hp,) = [r for r in cluster["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    hyperpod_mounts = [any("FsxLustreConfig" in c for c in g.get("InstanceStorageConfigs", []))
                       for g in hp["Properties"]["InstanceGroups"]]
    assert set(hyperpod_mounts) == {not lifecycle_mounts}
    assert ("FileSystemDNSName" in lifecycle_markers(cluster)) is lifecycle_mounts


def test_the_gpu_job_map_needs_the_collectors_that_write_its_hooks():
    import yaml
    from helpers import ROOT

    data = yaml.safe_load((ROOT / "examples" / "hyperpod-slurm-p5.yaml").read_text())
    assert data["orchestrator"]["hyperpod"]["gpu_job_map"] is True
    data["observability"] = {"enabled": False}
    with pytest.raises(SpecError) as refused:
        parse_spec(data)
    assert "orchestrator.hyperpod.gpu_job_map" in str(refused.value)
    del data["orchestrator"]["hyperpod"]["gpu_job_map"]
    assert parse_spec(data).orchestrator.hyperpod.gpu_job_map is False

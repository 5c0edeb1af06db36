"""Managed tiered checkpointing's IAM on HyperPod on EKS: with `checkpoints.tier: managed`
(examples/hyperpod-eks-p5en-training-plan.yaml) the training pods get a Pod Identity role that may read and write only
the checkpoint prefix of the data bucket (and its key, through S3) and put CloudWatch metrics, bound to the
``fmcluster-checkpoints`` service account of every team namespace, which the team-objects Deployment creates once task
governance has made the namespace (the stack never waits for it); a file tier (examples/hyperpod-eks-p5.yaml) creates
none of it."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest
import yaml
from helpers import actions_of, resources_of
from helpers.jobs import objects
from helpers.resume_jobs import ROOT

from fmcluster.orchestrators.hyperpod_eks import checkpoint_access
from fmcluster.orchestrators.hyperpod_eks.settings import HyperPodEksOrchestrator
from fmcluster.platforms.kubernetes import pod_identity, team_objects
from fmcluster.registry import load_spec, parse_spec
from fmcluster.spec.checkpoints import paths

ASSOCIATION = "AWS::EKS::PodIdentityAssociation"


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "examples" / "hyperpod-eks-p5en-training-plan.yaml")


@pytest.fixture(scope="module")
def template(synth_example) -> Dict[str, Any]:
    return synth_example("hyperpod-eks-p5en-training-plan")["hpeks-p5en-cluster"]


def applied(template: Dict[str, Any]) -> List[List[Dict[str, Any]]]:
    """The objects of each manifest (values from other stacks read TOKEN)."""
    def parse(manifest: Any) -> List[Dict[str, Any]]:
        return json.loads(manifest if isinstance(manifest, str) else "".join(
            p if isinstance(p, str) else "TOKEN" for p in manifest["Fn::Join"][1]))

    return [parse(m["Properties"]["Manifest"])
            for m in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").values()]


def team_objects_manifest(template: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The objects of the manifest that runs the team-objects Deployment."""
    (objects,) = [objs for objs in applied(template)
                  if any(o["kind"] == "Deployment" and o["metadata"]["name"] == team_objects.NAME for o in objs)]
    return objects


def named(objects: List[Dict[str, Any]], kind: str, name: str) -> Dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _role_id(template: Dict[str, Any]) -> str:
    """The one role the checkpointing service account's associations hand out."""
    (role_id,) = {a["Properties"]["RoleArn"]["Fn::GetAtt"][0] for a in resources_of(template, ASSOCIATION).values()
                  if a["Properties"]["ServiceAccount"] == checkpoint_access.SERVICE_ACCOUNT}
    return role_id


@pytest.fixture(scope="module")
def statements(template) -> List[Dict[str, Any]]:
    role_id = _role_id(template)
    policies = [p for p in resources_of(template, "AWS::IAM::Policy").values()
                if {"Ref": role_id} in p["Properties"]["Roles"]]
    assert not template["Resources"][role_id]["Properties"].get("ManagedPolicyArns")
    return [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_pods_assume_the_role_through_pod_identity_only(template):
    trust = template["Resources"][_role_id(template)]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [(s["Principal"], sorted(s["Action"])) for s in trust] == [
        ({"Service": "pods.eks.amazonaws.com"}, ["sts:AssumeRole", "sts:TagSession"])]


def test_the_role_holds_exactly_the_checkpoint_actions(statements):
    by_sid = {s["Sid"]: sorted(actions_of(s)) for s in statements}
    assert by_sid == {
        "CheckpointObjects": ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
        "CheckpointListing": ["s3:ListBucket"],
        "CheckpointBucketRegion": ["s3:GetBucketLocation"],
        "CheckpointKey": ["kms:Decrypt", "kms:GenerateDataKey"],
        "CheckpointMetrics": ["cloudwatch:PutMetricData"],
    }
    assert all(s["Effect"] == "Allow" and "*" not in json.dumps(actions_of(s)) for s in statements)


def test_s3_access_stops_at_the_specs_checkpoint_prefix(statements, spec):
    prefix = paths(spec).durable.split("<data bucket>/", 1)[1]  # s3://<data bucket>/checkpoints/
    assert prefix == checkpoint_access.checkpoint_prefix(spec.checkpoints.directory) == "checkpoints/"
    bucket = {"Fn::ImportValue": "hpeks-p5en-storage-DataBucketArn"}
    by_sid = {s["Sid"]: s for s in statements}
    assert by_sid["CheckpointObjects"]["Resource"] == {"Fn::Join": ["", [bucket, f"/{prefix}*"]]}
    assert by_sid["CheckpointListing"]["Resource"] == bucket
    assert by_sid["CheckpointListing"]["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}*"]}}
    assert by_sid["CheckpointBucketRegion"]["Resource"] == bucket
    # only cloudwatch:PutMetricData, which has no resource-level permissions, is on "*"
    assert [s["Sid"] for s in statements if s["Resource"] == "*"] == ["CheckpointMetrics"]


def test_the_data_key_is_usable_through_s3_only(statements, spec):
    (key,) = [s for s in statements if s["Sid"] == "CheckpointKey"]
    assert key["Resource"] == {"Fn::ImportValue": "hpeks-p5en-storage-DataKeyArn"}
    assert key["Condition"] == {"StringEquals": {"kms:ViaService": f"s3.{spec.region}.amazonaws.com"}}


def test_every_team_namespace_gets_the_role_and_the_service_account(template, spec):
    teams = HyperPodEksOrchestrator.of(spec).task_governance.teams
    role_id = _role_id(template)
    bound = {a["Properties"]["Namespace"]: a["Properties"] for a in resources_of(template, ASSOCIATION).values()
             if a["Properties"]["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}}
    assert sorted(bound) == sorted(t.namespace for t in teams) == ["hyperpod-ns-pretraining"]
    assert {p["ServiceAccount"] for p in bound.values()} == {checkpoint_access.SERVICE_ACCOUNT}
    assert all(p["ClusterName"] == {"Ref": next(iter(resources_of(template, "AWS::EKS::Cluster")))} for p in bound.values())

    # the service account is created in each namespace by the team-objects Deployment, whenever the namespace appears
    team_manifest = team_objects_manifest(template)
    wanted = json.loads(named(team_manifest, "ConfigMap", team_objects.NAME)["data"][team_objects.OBJECTS_FILE])
    accounts = [o for o in wanted if o["kind"] == "ServiceAccount"]
    assert accounts == [pod_identity.service_account(checkpoint_access.SERVICE_ACCOUNT, t.namespace) for t in teams]
    assert [o["kind"] for o in wanted] == ["PersistentVolumeClaim", "ServiceAccount"], "the claim of FSx as well"
    # ... which its role may read by name and create, and the admission policy confines to exactly these
    rules = named(team_manifest, "ClusterRole", team_objects.NAME)["rules"]
    assert {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"],
            "resourceNames": [checkpoint_access.SERVICE_ACCOUNT]} in rules
    assert {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create"]} in rules
    policy = named(team_manifest, "ValidatingAdmissionPolicy", f"{team_objects.NAME}-service-accounts")
    assert json.loads(policy["spec"]["variables"][0]["expression"]) == [
        f"{t.namespace}/{checkpoint_access.SERVICE_ACCOUNT}" for t in teams]
    assert named(team_manifest, "ValidatingAdmissionPolicyBinding", f"{team_objects.NAME}-service-accounts")
    # and CloudFormation applies nothing into a team's namespace
    assert not [o for objs in applied(template) for o in objs
                if o["metadata"].get("namespace", "").startswith("hyperpod-ns-")]


def test_without_a_shared_file_system_the_team_objects_are_the_checkpoint_service_accounts(spec):
    """tier managed with no FSx: the Deployment still runs, for the service accounts alone (construct.py installs it
    whenever anything is wanted)."""
    data = yaml.safe_load((ROOT / "examples" / "hyperpod-eks-p5en-training-plan.yaml").read_text())
    del data["storage"]["fsx"]
    no_fsx = parse_spec(data)
    assert no_fsx.storage.fsx is None and no_fsx.checkpoints.tier == "managed"
    assert checkpoint_access.service_accounts(no_fsx) == [
        pod_identity.service_account(checkpoint_access.SERVICE_ACCOUNT, "hyperpod-ns-pretraining")]
    assert team_objects.objects(namespace="fmcluster-system", wanted=checkpoint_access.service_accounts(no_fsx),
                                node_selector={"fmcluster.io/node-group": "system"})


def test_a_file_tier_wants_no_checkpoint_service_account():
    assert checkpoint_access.service_accounts(load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")) == []


def test_the_pod_identity_agent_serves_the_credentials(template):
    addons = {a["Properties"]["AddonName"] for a in resources_of(template, "AWS::EKS::Addon").values()}
    assert "eks-pod-identity-agent" in addons


def test_the_stack_outputs_the_role_and_the_service_account(template):
    outputs = template["Outputs"]
    (role_arn,) = [o for k, o in outputs.items() if "CheckpointsRoleArn" in k]
    assert role_arn["Value"] == {"Fn::GetAtt": [_role_id(template), "Arn"]}
    (account,) = [o for k, o in outputs.items() if "CheckpointsServiceAccount" in k]
    assert account["Value"] == checkpoint_access.SERVICE_ACCOUNT


def test_file_tiers_create_no_checkpoint_role(synth_example):
    template = synth_example("hyperpod-eks-p5")["hpeks-p5-cluster"]
    assert load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml").checkpoints.tier == "fsx"
    assert not [a for a in resources_of(template, ASSOCIATION).values()
                if a["Properties"]["ServiceAccount"] == checkpoint_access.SERVICE_ACCOUNT]
    assert not [k for k in template["Resources"] if "Checkpoint" in k]
    assert not [k for k in template.get("Outputs", {}) if "Checkpoint" in k]


def test_the_resume_job_names_the_service_account_for_the_managed_tier():
    header = (ROOT / "examples" / "jobs" / "resume-train-hyperpod.yaml").read_text().split("\napiVersion:", 1)[0]
    assert f"serviceAccountName: {checkpoint_access.SERVICE_ACCOUNT}" in header
    # its own cluster (examples/hyperpod-eks-p5.yaml) checkpoints to FSx: no such service account there
    pods = [r["template"]["spec"] for r in objects("resume-train-hyperpod.yaml")["PyTorchJob"]["spec"]
            ["pytorchReplicaSpecs"].values()]
    assert all("serviceAccountName" not in p for p in pods)


def test_an_existing_bucket_gets_the_same_s3_statements_and_no_key_statement():
    from aws_cdk import Stack

    from fmcluster.app import new_app

    stack = Stack(new_app(nag=False), "Probe", env={"region": "us-west-2", "account": "111122223333"})
    kwargs = dict(region=stack.region, bucket_arn="arn:aws:s3:::team-data", prefix="ckpt/")
    created = [stack.resolve(s.to_statement_json()) for s in checkpoint_access.policy_statements(
        key_arn="arn:aws:kms:us-west-2:111122223333:key/k", **kwargs)]
    existing = [stack.resolve(s.to_statement_json()) for s in checkpoint_access.policy_statements(
        key_arn=None, **kwargs)]
    assert [s for s in created if s["Sid"] != "CheckpointKey"] == existing
    assert {s["Sid"] for s in created} - {s["Sid"] for s in existing} == {"CheckpointKey"}
    (objects,) = [s for s in existing if s["Sid"] == "CheckpointObjects"]
    assert objects["Resource"] == "arn:aws:s3:::team-data/ckpt/*"


@pytest.mark.parametrize("directory, prefix", [("/checkpoints", "checkpoints/"), ("/runs/ckpt", "runs/ckpt/")])
def test_the_prefix_is_the_checkpoint_directory_in_the_bucket(directory, prefix):
    assert checkpoint_access.checkpoint_prefix(directory) == prefix

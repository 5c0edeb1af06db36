"""Mountpoint for Amazon S3 in the stacks, read from the examples that mount it (each synthesized once per run):
what the storage stack creates and keeps, what each kind's nodes and pods get, and every kind taking it in the spec.
Examples: existing-vpc (none kind, an existing bucket), pcs-p6-b200-odcr (pcs, an S3 Express One Zone directory
bucket), eks-p6-b200-capacity-block (eks, a created bucket beside FSx), hyperpod-slurm-p5 (a created bucket beside
FSx), hyperpod-eks-p5en-serving (an existing bucket, one CSI driver with serving's weights)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List

import pytest
import yaml
from helpers import ROOT, group_profile, policy_statements, resources_of

from fmcluster import registry
from fmcluster.platforms.storage.mountpoint_s3.mount import KEY_FINGERPRINT, VERSION
from fmcluster.platforms.storage.mountpoint_s3.resources import BUCKET_ID, DIRECTORY_BUCKET_ID, KEY_ID
from fmcluster.spec import SpecError


def user_data(template: Dict[str, Any]) -> str:
    return json.dumps([r["Properties"]["LaunchTemplateData"].get("UserData")
                       for r in resources_of(template, "AWS::EC2::LaunchTemplate").values()])


def sids(template: Dict[str, Any], prefix: str) -> Dict[str, List[Dict[str, Any]]]:
    found: Dict[str, List[Dict[str, Any]]] = {}
    for s in policy_statements(template):
        if str(s.get("Sid", "")).startswith(prefix):
            found.setdefault(s["Sid"], []).append(s)
    return found


def retained(resource: Dict[str, Any]) -> bool:
    return resource.get("DeletionPolicy") == "Retain" and resource.get("UpdateReplacePolicy") == "Retain"


def test_a_directory_bucket_in_the_storage_subnets_az_with_its_own_key_kept_whatever_happens(synth_example):
    t = synth_example("pcs-p6-b200-odcr")
    storage, network, cluster = t["pcs-b200-storage"], t["pcs-b200-network"], t["pcs-b200-cluster"]
    bucket = storage["Resources"][DIRECTORY_BUCKET_ID]
    key = storage["Resources"][KEY_ID]
    assert bucket["Type"] == "AWS::S3Express::DirectoryBucket" and retained(bucket) and retained(key)
    assert key["Properties"]["EnableKeyRotation"] is True
    assert bucket["Properties"]["DataRedundancy"] == "SingleAvailabilityZone"
    zone = bucket["Properties"]["LocationName"]["Fn::ImportValue"]
    exported = {o["Export"]["Name"]: o["Value"] for o in network["Outputs"].values() if "Export" in o}
    subnet, attribute = exported[zone]["Fn::GetAtt"]
    assert attribute == "AvailabilityZoneId" and subnet.startswith("VpcStorageSubnet")
    encryption = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert encryption["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms",
                                                           "KMSMasterKeyID": {"Fn::GetAtt": [KEY_ID, "Arn"]}}
    # the nodes: a session on the bucket and the key's data keys, no s3: action
    found = sids(cluster, "MountpointS3")
    assert set(found) == {"MountpointS3Session", "MountpointS3Key"}
    (session,) = found["MountpointS3Session"]
    assert session["Action"] == "s3express:CreateSession"
    assert {"Fn::ImportValue": "pcs-b200-storage-MountpointBucketName"} in session["Resource"]["Fn::Join"][1]
    assert found["MountpointS3Key"][0]["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
    # every node group and the login node mount it read-write at /checkpoints, after the signed client's install
    data = user_data(cluster)
    assert data.count(f"mount-s3-{VERSION}") >= 3 * 2 and KEY_FINGERPRINT in data
    assert data.count("timeout 120 mount /checkpoints") == 3
    assert " /checkpoints mount-s3 _netdev,nosuid,nodev,nofail,rw,allow-other,region=us-west-2,allow-overwrite," \
           "allow-delete 0 0" in data
    # the nodes reach the zonal endpoints through a gateway endpoint of their own, not the NAT gateway
    (endpoint,) = [r for r in resources_of(network, "AWS::EC2::VPCEndpoint").values()
                   if "s3express" in json.dumps(r["Properties"]["ServiceName"])]
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway" and len(endpoint["Properties"]["RouteTableIds"]) == 3
    assert group_profile(cluster, "b200")["mounts"] == [
        {"path": "/checkpoints", "fstype": "fuse", "source": "mountpoint-s3", "required": True, "read_only": False}]


def test_a_created_bucket_is_tls_only_logged_and_reached_by_nodes_and_pods_below_its_prefix(synth_example):
    t = synth_example("eks-p6-b200-capacity-block")
    storage, cluster = t["eks-b200-storage"], t["eks-b200-cluster"]
    bucket = storage["Resources"][BUCKET_ID]
    assert retained(bucket) and retained(storage["Resources"][KEY_ID])
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": "AccessLogBucket"}
    assert all(props["PublicAccessBlockConfiguration"].values())
    tls = [s for s in policy_statements(storage) if s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
           and {"Fn::GetAtt": [BUCKET_ID, "Arn"]} in s["Resource"]]
    assert tls and tls[0]["Effect"] == "Deny"
    assert resources_of(storage, "AWS::FSx::FileSystem"), "FSx is still built beside it"
    # nodes (the node role) and the CSI driver's Pod Identity role: list below datasets/, read there, decrypt
    nodes, driver = sids(cluster, "MountpointS3"), sids(cluster, "MountpointCsi")
    for found, prefix in ((nodes, "MountpointS3"), (driver, "MountpointCsi")):
        assert set(found) == {f"{prefix}List", f"{prefix}Objects", f"{prefix}Key"}
        (listing,) = found[f"{prefix}List"]
        assert listing["Condition"] == {"StringLike": {"s3:prefix": ["datasets/*"]}}
        assert found[f"{prefix}Objects"][0]["Action"] == "s3:GetObject"
        assert found[f"{prefix}Objects"][0]["Resource"]["Fn::Join"][1][-1] == "/datasets/*"
        assert found[f"{prefix}Key"][0]["Action"] == "kms:Decrypt"
    addons = {r["Properties"]["AddonName"]: r for r in resources_of(cluster, "AWS::EKS::Addon").values()}
    csi = addons["aws-mountpoint-s3-csi-driver"]
    assert csi["Properties"]["PodIdentityAssociations"][0]["ServiceAccount"] == "s3-csi-driver-sa"
    volume = next(r for lid, r in cluster["Resources"].items() if lid.startswith("EksObjectsMountpointS3"))
    manifest = json.dumps(volume["Properties"]["Manifest"])
    assert "s3.csi.aws.com" in manifest and '\\"read-only\\"' in manifest and "prefix datasets/" in manifest
    # the EKS image gets the RPM, and both the FSx and S3 mounts
    data = user_data(cluster)
    assert f"mount-s3-{VERSION}-$(uname -m | sed s/aarch64/arm64/).rpm" in data and "lustre-client" in data


def test_an_existing_bucket_is_mounted_not_created(synth_example):
    t = synth_example("existing-vpc")
    storage, cluster = t["fm-prod-storage"], t["fm-prod-cluster"]
    assert not [lid for lid in storage["Resources"] if lid.startswith("Mountpoint")]
    found = sids(cluster, "MountpointS3")
    assert found["MountpointS3List"][0]["Resource"] == "arn:aws:s3:::fm-prod-training-data"
    assert found["MountpointS3Objects"][0]["Resource"] == "arn:aws:s3:::fm-prod-training-data/datasets/*"
    assert "MountpointS3Key" not in found
    data = user_data(cluster)
    assert "s3://fm-prod-training-data/datasets/ /datasets mount-s3 _netdev,nosuid,nodev,nofail,ro,allow-other," \
           "cache=/opt/dlami/nvme/s3-cache,metadata-ttl=300 0 0" in data


def test_the_storage_stacks_of_examples_without_the_store_do_not_name_it(synth_example):
    storage = synth_example("pcs-p5")["pcs-p5-storage"]
    assert "Mountpoint" not in storage["Description"] and "FSx for Lustre" in storage["Description"]


@pytest.mark.parametrize("example", ["hyperpod-slurm-p5", "hyperpod-eks-p5", "pcs-p5", "parallelcluster-p5"])
def test_every_kind_takes_the_section(example):
    data = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text())
    data.setdefault("storage", {})["mountpoint_s3"] = {"bucket": "datasets", "mount_point": "/datasets-s3"}
    assert registry.parse_spec(data).storage.mountpoint_s3 is not None


def test_a_kind_refuses_a_store_that_lacks_every_form_it_mounts_through(monkeypatch):
    """hyperpod-eks needs a Kubernetes volume for the teams' pods: a store with boot lines only is refused."""
    from fmcluster.platforms.storage.mountpoint_s3.settings import MountpointS3

    monkeypatch.setattr(MountpointS3, "forms", frozenset({"boot"}))
    data = yaml.safe_load((ROOT / "examples" / "hyperpod-eks-p5.yaml").read_text())
    data["storage"]["mountpoint_s3"] = {"bucket": "datasets"}
    with pytest.raises(SpecError) as e:
        registry.parse_spec(data)
    assert e.value.problems == ["storage.mountpoint_s3: orchestrator hyperpod-eks mounts a store through kubernetes "
                                "and lifecycle or boot and kubernetes; this store offers boot (docs/storage.md)"]


def test_the_cli_takes_it_on_hyperpod_and_refuses_a_bad_field_with_exit_2_naming_it(tmp_path):
    data = yaml.safe_load((ROOT / "examples" / "hyperpod-eks-p5.yaml").read_text())
    data["storage"]["mountpoint_s3"] = {"bucket": "datasets"}
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(data))
    data["storage"]["mountpoint_s3"]["prefix"] = "eval"
    bad.write_text(yaml.safe_dump(data))
    run = [sys.executable, "-m", "fmcluster", "validate"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([*run, str(good)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([*run, str(bad)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and "storage.mountpoint_s3.prefix" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def test_hyperpod_slurm_nodes_mount_it_from_the_lifecycle_and_reach_only_its_prefix(synth_example):
    t = synth_example("hyperpod-slurm-p5")
    cluster = t["hp-p5-cluster"]
    found = sids(cluster, "MountpointS3")
    assert set(found) == {"MountpointS3List", "MountpointS3Objects", "MountpointS3Key"}
    assert found["MountpointS3List"][0]["Condition"] == {"StringLike": {"s3:prefix": ["corpus/*"]}}
    assert found["MountpointS3Objects"][0]["Action"] == "s3:GetObject"
    assert found["MountpointS3Objects"][0]["Resource"]["Fn::Join"][1][-1] == "/corpus/*"
    roles = {s["Sid"]: lid for lid, r in resources_of(cluster, "AWS::IAM::Policy").items()
             for s in r["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid", "").startswith("MountpointS3")}
    assert {lid.startswith("HyperPodInstanceRole") for lid in roles.values()} == {True}, "the HyperPod instance role"
    assert group_profile(cluster, "h100")["mounts"][-1] == {
        "path": "/s3", "fstype": "fuse", "source": "mountpoint-s3", "required": True, "read_only": True}


def test_hyperpod_eks_pods_reach_it_through_the_one_csi_add_on_serving_streams_weights_with(synth_example):
    cluster = synth_example("hyperpod-eks-p5en-serving")["hpeks-serve-cluster"]
    (addon,) = [r["Properties"] for r in resources_of(cluster, "AWS::EKS::Addon").values()
                if r["Properties"]["AddonName"] == "aws-mountpoint-s3-csi-driver"]
    assert "PodIdentityAssociations" not in addon, "v1 of the driver reads IRSA only"
    role = addon["ServiceAccountRoleArn"]["Fn::GetAtt"][0]
    driver = {s["Sid"]: s for lid, r in resources_of(cluster, "AWS::IAM::Policy").items()
              if {"Ref": role} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]}
    assert {"MountpointCsiList", "MountpointCsiObjects", "ReadModel1"} <= set(driver), "the store's and serving's"
    assert driver["MountpointCsiObjects"]["Resource"] == "arn:aws:s3:::my-eval-bucket/eval/*"
    nodes = sids(cluster, "MountpointS3")
    assert nodes["MountpointS3Objects"][0]["Resource"] == "arn:aws:s3:::my-eval-bucket/eval/*"
    (volume,) = [r for lid, r in cluster["Resources"].items() if lid.startswith("HyperPodEksObjectsResearchMountpointS3")]
    manifest = json.dumps(volume["Properties"]["Manifest"])
    assert "s3.csi.aws.com" in manifest and "prefix eval/" in manifest and "my-eval-bucket" in manifest
    assert group_profile(cluster, "h200")["mounts"] == [
        {"path": "/s3", "fstype": "fuse", "source": "mountpoint-s3", "required": True, "read_only": True}]


def test_every_example_keeps_the_pinned_logical_ids_of_what_the_store_creates():
    """Read from the committed templates (tests/test_quality.py holds them to a fresh synth): the key and the bucket
    keep these ids whatever the kind or the compute, so no change but the spec's own section replaces them."""
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        settings = registry.load_spec(example).storage.mountpoint_s3
        (path,) = (ROOT / "templates" / example.stem).glob("*-storage.template.json")
        ids = {k for k in json.loads(path.read_text())["Resources"] if k.startswith("Mountpoint")}
        expected = set()
        if settings is not None and settings.existing_bucket is None:
            expected = {KEY_ID, DIRECTORY_BUCKET_ID if settings.express is not None else BUCKET_ID}
            expected |= set() if settings.express is not None else {"MountpointBucketPolicyCFF155AA"}
        assert ids == expected, example.stem


def test_the_store_folder_holds_its_declaration_settings_constructs_builder_mount_and_change_rules():
    folder = ROOT / "fmcluster" / "platforms" / "storage" / "mountpoint_s3"
    assert {p.name for p in folder.glob("*.py")} == {"__init__.py", "settings.py", "construct.py", "resources.py",
                                                     "mount.py", "changes.py", "preflight.py", "figures.py",
                                                     "facts.py"}
    (store,) = [s for s in registry.stores() if s.spec_key == "mountpoint_s3"]
    assert type(store).__module__ == "fmcluster.platforms.storage.mountpoint_s3"
    assert (store.lifecycle_key, store.uses_data_key, store.always_described) == (None, False, False)


def test_an_existing_vpc_gets_the_s3_express_gateway_endpoint_on_its_route_tables():
    from aws_cdk.assertions import Template

    from fmcluster.app import build_stacks

    data = yaml.safe_load((ROOT / "examples" / "existing-vpc.yaml").read_text())
    data["storage"]["mountpoint_s3"] = {"express": {"zone_id": "usw2-az2"}, "read_only": False}
    network = Template.from_stack(build_stacks(registry.parse_spec(data), nag=False).network).to_json()
    services = {r["Properties"]["ServiceName"]: r["Properties"]["RouteTableIds"]
                for r in resources_of(network, "AWS::EC2::VPCEndpoint").values()}
    assert services == {"com.amazonaws.us-west-2.s3": ["rtb-0a1b2c3d4e5f60718"],
                        "com.amazonaws.us-west-2.s3express": ["rtb-0a1b2c3d4e5f60718"]}


def test_hyperpod_eks_without_serving_installs_the_driver_on_an_irsa_role_of_its_own():
    from aws_cdk.assertions import Template

    from fmcluster.app import build_stacks

    data = yaml.safe_load((ROOT / "examples" / "hyperpod-eks-p5.yaml").read_text())
    data["storage"]["mountpoint_s3"] = {"bucket": "datasets", "prefix": "train/", "mount_point": "/datasets"}
    cluster = Template.from_stack(build_stacks(registry.parse_spec(data), nag=True).cluster).to_json()
    (addon,) = [r["Properties"] for r in resources_of(cluster, "AWS::EKS::Addon").values()
                if r["Properties"]["AddonName"] == "aws-mountpoint-s3-csi-driver"]
    assert "PodIdentityAssociations" not in addon and addon["AddonVersion"].startswith("v1.")
    role = addon["ServiceAccountRoleArn"]["Fn::GetAtt"][0]
    trust = json.dumps(cluster["Resources"][role]["Properties"]["AssumeRolePolicyDocument"])
    assert "sts:AssumeRoleWithWebIdentity" in trust
    # one provider per cluster (IAM refuses a second for the URL), at the logical id serving gave it: adding or removing
    # serving later leaves it where it is instead of creating a second one, which would fail the deploy
    (serving,) = (ROOT / "templates" / "hyperpod-eks-p5en-serving").glob("*-cluster.template.json")
    assert list(resources_of(cluster, "AWS::IAM::OIDCProvider")) == list(
        resources_of(json.loads(serving.read_text()), "AWS::IAM::OIDCProvider"))
    driver = {s["Sid"]: s for r in resources_of(cluster, "AWS::IAM::Policy").values()
              if {"Ref": role} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]}
    assert set(driver) == {"MountpointCsiList", "MountpointCsiObjects"}
    assert driver["MountpointCsiObjects"]["Resource"] == "arn:aws:s3:::datasets/train/*"

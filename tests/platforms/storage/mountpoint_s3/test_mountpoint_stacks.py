"""Mountpoint for Amazon S3 in the stacks, read from the examples that mount it (each synthesized once per run):
what the storage stack creates and keeps, what each kind's nodes and pods get, and the kinds that cannot mount it yet
refusing it in the spec (exit 2). Examples: existing-vpc (none kind, an existing bucket), pcs-p6-b200-odcr (pcs, an S3
Express One Zone directory bucket), eks-p6-b200-capacity-block (eks, a created bucket beside FSx)."""

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


@pytest.mark.parametrize("example, ways", [
    ("hyperpod-slurm-p5", "sagemaker-hyperpod or lifecycle"),
    ("hyperpod-eks-p5", "kubernetes and lifecycle"),
])
def test_kinds_that_cannot_mount_it_yet_refuse_the_section_in_the_spec(example, ways):
    data = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text())
    data["storage"]["mountpoint_s3"] = {"bucket": "datasets"}
    with pytest.raises(SpecError) as e:
        registry.parse_spec(data)
    kind = data["orchestrator"]["type"]
    assert e.value.problems == [f"storage.mountpoint_s3: orchestrator {kind} mounts a store through {ways}; this "
                                "store offers boot, kubernetes (docs/storage.md)"]


def test_the_cli_refuses_it_with_exit_2_not_a_traceback(tmp_path):
    data = yaml.safe_load((ROOT / "examples" / "hyperpod-slurm-p5.yaml").read_text())
    data["storage"]["mountpoint_s3"] = {}
    path = tmp_path / "hyperpod-s3.yaml"
    path.write_text(yaml.safe_dump(data))
    r = subprocess.run([sys.executable, "-m", "fmcluster", "synth", str(path)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "storage.mountpoint_s3: orchestrator hyperpod-slurm" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


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
                                                     "mount.py", "changes.py", "preflight.py"}
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

"""The storage stack: KMS key, data bucket, FSx for Lustre and its data repository associations.
Stateful, so: retained, fixed logical ids, and untouched by any compute change."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from helpers import group_profile, policy_statements, resources_of

ROOT = Path(__file__).resolve().parents[2]
STATEFUL = ("AWS::KMS::Key", "AWS::S3::Bucket", "AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation")


@pytest.fixture(scope="module")
def default(synth_example):
    return synth_example("default")


@pytest.fixture(scope="module")
def storage(default):
    return default["fm-dev-storage"]


@pytest.fixture(scope="module")
def efa_storage(synth_example):
    return synth_example("pcs-p5en-capacity-block")["pcs-p5en-storage"]


def only(template: Dict[str, Any], type_: str) -> Dict[str, Any]:
    found = resources_of(template, type_)
    assert len(found) == 1, f"{len(found)} {type_}"
    return next(iter(found.values()))


def test_every_stateful_resource_is_retained_on_delete_and_on_replacement(storage, efa_storage):
    for template in (storage, efa_storage):
        stateful = {k: v for k, v in template["Resources"].items() if v["Type"] in STATEFUL}
        assert {v["Type"] for v in stateful.values()} == set(STATEFUL)
        for logical_id, res in stateful.items():
            assert res.get("DeletionPolicy") == "Retain", logical_id
            assert res.get("UpdateReplacePolicy") == "Retain", logical_id


def test_stateful_logical_ids_are_pinned(storage):
    ids = set(storage["Resources"])
    assert {"DataKey", "DataBucket", "AccessLogBucket", "FileSystem"} <= ids
    dras = resources_of(storage, "AWS::FSx::DataRepositoryAssociation")
    assert sorted(dras) == sorted(k for k in ids if k.startswith("DraDatasets") or k.startswith("DraCheckpoints"))


def test_the_storage_stack_has_termination_protection():
    from fmcluster.app import build_stacks

    stacks = build_stacks(ROOT / "examples" / "default.yaml", nag=False)
    assert stacks.storage.termination_protection is True
    assert stacks.cluster.termination_protection is False


def test_persistent_2_file_system_properties(storage):
    fs = only(storage, "AWS::FSx::FileSystem")["Properties"]
    assert fs["FileSystemType"] == "LUSTRE"
    assert fs["FileSystemTypeVersion"] == "2.15"
    assert fs["StorageType"] == "SSD"
    assert fs["StorageCapacity"] == 4800
    assert fs["KmsKeyId"] == {"Fn::GetAtt": ["DataKey", "Arn"]}
    lustre = fs["LustreConfiguration"]
    assert lustre["DeploymentType"] == "PERSISTENT_2"
    assert lustre["PerUnitStorageThroughput"] == 250
    assert lustre["DataCompressionType"] == "LZ4"
    assert lustre["MetadataConfiguration"] == {"Mode": "AUTOMATIC"}
    assert lustre["WeeklyMaintenanceStartTime"] == "7:03:00"
    assert lustre["AutomaticBackupRetentionDays"] == 7
    assert lustre["DailyAutomaticBackupStartTime"] == "05:00"
    assert lustre["CopyTagsToBackups"] is True
    assert "EfaEnabled" not in lustre


def test_file_system_lives_in_the_storage_subnet_not_the_resizable_node_subnet(default, storage):
    fs = only(storage, "AWS::FSx::FileSystem")["Properties"]
    network = default["fm-dev-network"]
    (subnet_ref,) = fs["SubnetIds"]
    export = subnet_ref["Fn::ImportValue"]
    storage_subnets = [k for k in resources_of(network, "AWS::EC2::Subnet") if "Storage" in k]
    assert len(storage_subnets) == 1
    assert storage_subnets[0] in json.dumps({k: v for k, v in network["Outputs"].items() if v.get("Export", {})
                                             .get("Name") == export})


def test_lustre_security_group_admits_lustre_ports_from_the_nodes_only(default, storage):
    sg = only(storage, "AWS::EC2::SecurityGroup")["Properties"]
    assert all(rule.get("CidrIp") != "0.0.0.0/0" for rule in sg.get("SecurityGroupIngress", []))
    rules = resources_of(storage, "AWS::EC2::SecurityGroupIngress")
    ports = sorted({(r["Properties"]["FromPort"], r["Properties"]["ToPort"]) for r in rules.values()})
    assert ports == [(988, 988), (1018, 1023)]
    sources = {json.dumps(r["Properties"]["SourceSecurityGroupId"]) for r in rules.values()}
    assert len(sources) == 2  # itself (the file servers) and the nodes' EFA group
    assert any("EfaSecurityGroup" in s for s in sources)
    # and the nodes may open connections to it (their group's egress is otherwise closed)
    egress = [r for r in resources_of(storage, "AWS::EC2::SecurityGroupEgress").values()
              if "EfaSecurityGroup" in json.dumps(r["Properties"]["GroupId"])]
    assert sorted((r["Properties"]["FromPort"], r["Properties"]["ToPort"]) for r in egress) == [(988, 988), (1018, 1023)]


def test_efa_enabled_file_system_uses_the_nodes_efa_group_and_metadata_iops(efa_storage):
    fs = only(efa_storage, "AWS::FSx::FileSystem")["Properties"]
    lustre = fs["LustreConfiguration"]
    assert lustre["EfaEnabled"] is True
    assert lustre["PerUnitStorageThroughput"] == 1000
    assert lustre["MetadataConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": 12000}
    assert fs["StorageCapacity"] == 38400
    (sg,) = fs["SecurityGroupIds"]
    assert "EfaSecurityGroup" in json.dumps(sg)
    assert not resources_of(efa_storage, "AWS::EC2::SecurityGroup")


def test_two_associations_import_datasets_and_export_checkpoints(storage):
    dras = {r["Properties"]["FileSystemPath"]: r["Properties"]
            for r in resources_of(storage, "AWS::FSx::DataRepositoryAssociation").values()}
    assert set(dras) == {"/datasets", "/checkpoints"}
    datasets, checkpoints = dras["/datasets"], dras["/checkpoints"]
    assert datasets["S3"] == {"AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}
    assert datasets["BatchImportMetaDataOnCreate"] is True
    assert checkpoints["S3"] == {"AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}
    assert checkpoints["BatchImportMetaDataOnCreate"] is False
    for dra, prefix in ((datasets, "datasets/"), (checkpoints, "checkpoints/")):
        assert dra["FileSystemId"] == {"Ref": "FileSystem"}
        assert dra["ImportedFileChunkSize"] == 1024
        path = json.dumps(dra["DataRepositoryPath"])
        assert '"s3://"' in path and '"Ref": "DataBucket"' in path and prefix in path


def test_data_bucket_is_kms_encrypted_versioned_private_tls_only_and_logged(storage):
    bucket = storage["Resources"]["DataBucket"]["Properties"]
    sse = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert sse["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms",
                                                     "KMSMasterKeyID": {"Fn::GetAtt": ["DataKey", "Arn"]}}
    assert sse["BucketKeyEnabled"] is True
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert bucket["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": "AccessLogBucket"}
    rules = {r.get("Prefix", ""): r for r in bucket["LifecycleConfiguration"]["Rules"]}
    assert rules["checkpoints/"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 14}
    assert rules[""]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    assert all(r["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7} for r in rules.values())
    for policy in resources_of(storage, "AWS::S3::BucketPolicy").values():
        denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)


def test_key_rotates_and_lets_only_fsx_data_repository_roles_of_this_account_use_it(storage):
    key = storage["Resources"]["DataKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    (stmt,) = [s for s in policy_statements({"Resources": {"k": storage["Resources"]["DataKey"]}})
               if s.get("Sid") == "FsxDataRepositoryRoleUsesKey"]
    assert stmt["Principal"] == {"AWS": "*"}
    assert stmt["Condition"]["StringEquals"] == {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}
    arn = json.dumps(stmt["Condition"]["ArnLike"]["aws:PrincipalArn"])
    assert "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*" in arn
    assert not any(a.endswith("*") for a in stmt["Action"])


def test_nodes_mount_the_file_system_and_their_profile_requires_it(default):
    cluster = json.dumps(default["fm-dev-cluster"])
    assert "python3 -m fmcluster.runtime.lustre mount" in cluster
    assert "--mount-point /fsx" in cluster and "--fstab" in cluster
    for group in ("gpu",):
        profile = group_profile(default["fm-dev-cluster"], group)
        assert profile["mounts"] == [{"efa": False, "fstype": "lustre", "path": "/fsx", "required": True}]
    assert "fm-dev-storage-DataBucketArn" in cluster


def test_efa_file_system_mounts_with_lnet_over_efa(synth_example):
    cluster = json.dumps(synth_example("pcs-p5en-capacity-block")["pcs-p5en-cluster"])
    assert "--mount-point /fsx --efa --fstab" in cluster


# --- reliability: compute changes never touch storage --------------------------------


def _storage_template(spec: Dict[str, Any]) -> Dict[str, Any]:
    from fmcluster.app import build_stacks
    from fmcluster.registry import parse_spec

    stacks = build_stacks(parse_spec(spec), nag=False)
    assembly = stacks.app.synth()
    return assembly.get_stack_by_name(stacks.storage.stack_name).template  # type: ignore[no-any-return]


def test_compute_changes_leave_every_storage_resource_unchanged():
    base = yaml.safe_load((ROOT / "examples" / "default.yaml").read_text())
    before = _storage_template(base)
    variants = {}
    more = copy.deepcopy(base)
    more["node_groups"][0]["count"] = 64
    variants["more nodes"] = more
    another = copy.deepcopy(base)
    another["node_groups"].append({"name": "cpu", "instance_type": "m5.xlarge", "count": 2, "role": "cpu"})
    variants["another node group"] = another
    other_type = copy.deepcopy(base)
    other_type["node_groups"][0]["instance_type"] = "p5en.48xlarge"
    variants["another instance type"] = other_type
    pcs = copy.deepcopy(base)
    pcs["orchestrator"] = {"type": "pcs"}
    pcs["node_groups"][0].update(ami_id="ami-0123456789abcdef0", image_family="dlami-ubuntu-22.04")
    variants["another orchestrator"] = pcs
    for what, spec in variants.items():
        assert _storage_template(spec) == before, f"{what} changed the storage stack"


def test_storage_never_depends_on_the_cluster_stack():
    from fmcluster.app import build_stacks

    stacks = build_stacks(ROOT / "examples" / "default.yaml", nag=False)
    stacks.app.synth()  # references become dependencies while the app is prepared
    assert stacks.storage in stacks.cluster.dependencies
    assert {s.stack_name for s in stacks.storage.dependencies} == {"fm-dev-network"}


def test_scratch_and_lustre_2_12_file_systems_get_only_what_they_support():
    base = yaml.safe_load((ROOT / "examples" / "default.yaml").read_text())
    base.pop("checkpoints")  # its S3 export needs the association these variants drop
    scratch = copy.deepcopy(base)
    scratch["storage"]["fsx"] = {"deployment_type": "SCRATCH_2", "storage_capacity_gib": 1200}
    fs = only(_storage_template(scratch), "AWS::FSx::FileSystem")["Properties"]
    lustre = fs["LustreConfiguration"]
    assert lustre["DeploymentType"] == "SCRATCH_2" and "KmsKeyId" not in fs  # scratch: FSx-managed key
    for absent in ("PerUnitStorageThroughput", "MetadataConfiguration", "AutomaticBackupRetentionDays",
                   "DailyAutomaticBackupStartTime", "CopyTagsToBackups"):
        assert absent not in lustre, absent
    old = copy.deepcopy(base)
    old["storage"]["fsx"] = {"lustre_version": "2.12"}
    fs = only(_storage_template(old), "AWS::FSx::FileSystem")["Properties"]
    assert fs["FileSystemTypeVersion"] == "2.12" and "MetadataConfiguration" not in fs["LustreConfiguration"]


def test_fsx_free_capacity_alarm_watches_the_file_system_and_notifies_the_alert_topic(default):
    obs = default["fm-dev-observability"]
    (alarm,) = resources_of(obs, "AWS::CloudWatch::Alarm").values()
    props = alarm["Properties"]
    assert (props["Namespace"], props["MetricName"]) == ("AWS/FSx", "FreeDataStorageCapacity")
    (dim,) = props["Dimensions"]
    assert dim["Name"] == "FileSystemId" and "fm-dev-storage" in json.dumps(dim["Value"])
    assert props["Threshold"] == 4800 * 1024**3 * 0.1 and props["ComparisonOperator"] == "LessThanThreshold"
    assert props["AlarmActions"] and props["OKActions"]


def test_pcs_login_node_mounts_the_file_system_over_tcp(synth_example):
    cluster = synth_example("pcs-p5en-capacity-block")["pcs-p5en-cluster"]
    (login,) = [r for k, r in resources_of(cluster, "AWS::EC2::LaunchTemplate").items() if k.startswith("Login")]
    user_data = json.dumps(login)
    assert "python3 -m fmcluster.runtime.lustre mount" in user_data
    assert "--mount-point /fsx --fstab" in user_data and "--efa" not in user_data  # m5: no EFA, LNet over TCP
    assert "node_bootstrap.sh" not in user_data  # nothing to validate on a login node


def test_node_profiles_expect_lnet_over_efa_only_on_efa_nodes():
    from fmcluster.profiles import node_profile
    from fmcluster.registry import parse_spec

    spec = parse_spec({"name": "mixed", "region": "us-east-1", "availability_zone": "us-east-1a",
                       "storage": {"fsx": {"efa": True}},
                       "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 1},
                                       {"name": "cpu", "instance_type": "m5.xlarge", "count": 1, "role": "cpu"}]})
    gpu, cpu = (node_profile(spec, g).mounts for g in spec.node_groups)
    assert gpu == [{"path": "/fsx", "fstype": "lustre", "required": True, "efa": True}]
    assert cpu == [{"path": "/fsx", "fstype": "lustre", "required": True, "efa": False}]


# The logical ids and exports of the storage stack's stateful resources as they were before FSx for Lustre's builder
# moved out of this stack into its store folder (platforms/storage/fsx_lustre/): a changed id replaces the resource on
# the next deploy, a changed export name fails the deploy of a cluster stack that imports it. Read from the committed
# templates, which tests/test_quality.py holds to a fresh synth of every example.
FILE_SYSTEM_IDS = {"FileSystem", "LustreSecurityGroup635FB4A0"}  # the group: SecurityGroupIds is create-only
ASSOCIATION_IDS = {"/datasets": "DraDatasetscb6de1db", "/checkpoints": "DraCheckpoints13df7a11"}
FILE_SYSTEM_EXPORTS = {"ExportsOutputRefFileSystem269DB546", "ExportsOutputFnGetAttFileSystemDNSNameCE8DD25A",
                       "ExportsOutputFnGetAttFileSystemLustreMountName7691690D"}
FILE_SYSTEM_OUTPUTS = {"FileSystemId", "FileSystemDnsName", "FileSystemMountName", "MountCommand"}
IDS_TYPES = (*STATEFUL, "AWS::EC2::SecurityGroup")


def test_every_examples_stateful_resources_keep_their_logical_ids_and_exports_across_the_store_move():
    from fmcluster.platforms.storage.fsx_lustre.resources import association_logical_id
    from fmcluster.registry import load_spec

    for example in sorted((ROOT / "examples").glob("*.yaml")):
        spec = load_spec(example)
        (path,) = (ROOT / "templates" / example.stem).glob("*-storage.template.json")
        template = json.loads(path.read_text())
        # a store registered after the move holds its own ids (tests/platforms/storage/mountpoint_s3/)
        ids = {k for k, v in template["Resources"].items() if v["Type"] in IDS_TYPES and not k.startswith("Mountpoint")}
        expected = {"DataKey"} | ({"DataBucket", "AccessLogBucket"} if not spec.storage.data_bucket.existing_name
                                  else set())
        fsx = spec.storage.fsx
        if fsx is not None:
            expected |= {"FileSystem"} | (set() if fsx.efa else {"LustreSecurityGroup635FB4A0"})
            dirs = [d.file_system_path for d in fsx.data_repository_associations]
            expected |= {association_logical_id(d) for d in dirs}
            assert all(association_logical_id(d) == ASSOCIATION_IDS[d] for d in dirs if d in ASSOCIATION_IDS)
            assert FILE_SYSTEM_EXPORTS | FILE_SYSTEM_OUTPUTS <= set(template["Outputs"]), example.stem
            exported = {v.get("Export", {}).get("Name") for v in template["Outputs"].values()}
            assert {f"{spec.stack_name('storage')}:{e}" for e in FILE_SYSTEM_EXPORTS} <= exported, example.stem
        assert ids == expected, example.stem
        key = template["Resources"]["DataKey"]["Properties"]
        assert key["Description"] == f"{spec.name}: data bucket and FSx for Lustre"
        assert any(s.get("Sid") == "FsxDataRepositoryRoleUsesKey" for s in key["KeyPolicy"]["Statement"]), \
            "the key policy never changes with the spec's storage"

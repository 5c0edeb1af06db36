"""The storage seam is real: a store defined here (its resources, outputs, boot lines with a client, a Kubernetes
volume with its CSI add-on, node permissions, a lifecycle entry) is built by the storage stack and mounted by a kind
that never names it; and outside FSx for Lustre's folder no file's text or path names Lustre or FSx but the two kept
below, each with why."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict

import pytest
from helpers import ROOT, policy_statements, resources_of

from fmcluster import images, registry
from fmcluster.platforms.storage import CsiAddon, Store
from fmcluster.platforms.storage.forms import (
    Arn,
    BootMount,
    BuiltStore,
    KubernetesVolume,
    Mount,
    NodeClient,
    Permission,
    StorageScope,
)

PACKAGE = ROOT / "fmcluster"
STORE_FOLDER = PACKAGE / "platforms" / "storage" / "fsx_lustre"
NAMES_IT = re.compile(r"lustre|fsx", re.IGNORECASE)

# What names Lustre or FSx outside the store's folder, and why it stays. The seam's own code (stacks, the EC2 and
# Kubernetes platforms, every kind's construct) mounts through the contract only.
KEPT: Dict[str, str] = {
    "fmcluster/registry.py": "the registry line: a store is one import and one STORES entry (as a kind is)",
    "fmcluster/runtime/lustre.py": "a forwarder (its text names no store) under the module path EC2 nodes' user data "
                                   "has run the mount helper by since the first release: renaming it would change "
                                   "every launch template and replace running nodes; the helper is the store's "
                                   "node/lustre.py",
}


def names_lustre() -> Dict[str, bool]:
    return {str(p.relative_to(ROOT)): True for p in PACKAGE.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and STORE_FOLDER not in p.parents
            and (NAMES_IT.search(str(p.relative_to(PACKAGE))) or NAMES_IT.search(p.read_text(errors="replace")))}


def test_nothing_outside_the_store_folder_names_lustre_but_the_registry_line_and_the_helpers_old_module_path():
    found = names_lustre()
    assert sorted(found) == sorted(KEPT), "name the store only in its folder"
    forwarder = (PACKAGE / "runtime" / "lustre.py").read_text()
    assert not NAMES_IT.search(forwarder), "the forwarder runs the helper by its own file name, naming no store"
    seam = ("fmcluster/stacks/", "fmcluster/platforms/ec2/", "fmcluster/constructs/", "fmcluster/app.py")
    assert not [p for p in found if p.startswith(seam)]


# A second store on paper, shaped as Mountpoint for Amazon S3 would be: a fuse mount of s3://bucket/prefix/ with a
# client every image installs, a CSI driver of its own (not always installed), S3 permissions for the nodes and the
# driver, no service-native form (HyperPod and ParallelCluster mount nothing of it).
TOY_BUCKET = "toy-bucket"


@dataclass(frozen=True)
class ToyStore(Store):
    def section(self, spec):  # configured in every spec of this test
        return spec.storage.data_bucket

    def build(self, scope: StorageScope) -> BuiltStore:
        from aws_cdk import aws_ssm as ssm

        ssm.StringParameter(scope.scope, "ToyStoreMarker", string_value="toy")
        s3 = Permission("ToyBucketList", ("s3:ListBucket",), (Arn("s3", TOY_BUCKET, regional=False),))
        return BuiltStore(
            mount=Mount(
                store=self.name, id="ToyStore", path="/toy", fstype="fuse.toy", source=f"s3://{TOY_BUCKET}/data/",
                options=("allow_other",),
                boot=BootMount(command="toy-mount /toy", failure="toy mount failed",
                               client=NodeClient("toy-client", install={
                                   **{f: "install-toy-client\n" for f in images.FAMILIES},
                                   "eks-al2023": "install-toy-client\n"})),
                kubernetes=KubernetesVolume(
                    addon="toy-csi-driver", driver="toy.csi.example.com", handle="toy-volume",
                    attributes={"bucketName": TOY_BUCKET}, mount_options=("allow-delete",), capacity_gib=1,
                    claim="toy", name="toy", driver_permissions=(s3,)),
                node_permissions=(s3,),
                lifecycle={"source": f"s3://{TOY_BUCKET}/data/", "mount_point": "/toy"}),
            outputs={"ToyStoreSource": f"s3://{TOY_BUCKET}/data/"},
        )


TOY = ToyStore(name="toy", title="Toy", spec_key="toy", resources="a toy store", lifecycle_key="toy",
               csi_addon=CsiAddon("toy-csi-driver", service_account="toy-csi-sa", source="https://example.com/toy"))


@pytest.fixture(scope="module")
def eks_with_a_toy_store() -> Dict[str, Dict]:
    from fmcluster.app import build_stacks

    saved = list(registry.STORES)
    registry.STORES.append(TOY)
    try:
        stacks = build_stacks(ROOT / "examples" / "eks-p5.yaml", nag=False)
    finally:
        registry.STORES[:] = saved
    assembly = stacks.app.synth()
    return {s.stack_name: assembly.get_stack_by_name(s.stack_name).template for s in stacks.all}


def test_a_registered_store_is_built_in_the_storage_stack_and_mounted_by_a_kind_that_never_names_it(
        eks_with_a_toy_store):
    storage, cluster = eks_with_a_toy_store["eks-p5-storage"], eks_with_a_toy_store["eks-p5-cluster"]
    assert "ToyStoreMarker" in json.dumps(storage["Resources"])
    assert storage["Outputs"]["ToyStoreSource"]["Value"] == "s3://toy-bucket/data/"
    assert resources_of(storage, "AWS::FSx::FileSystem"), "the FSx example's own store is still built"
    # EC2 user data: FSx's client and mount, then the toy store's (the EKS image ships neither client)
    user_data = json.dumps([r["Properties"]["LaunchTemplateData"].get("UserData")
                            for r in resources_of(cluster, "AWS::EC2::LaunchTemplate").values()])
    assert "install-toy-client\\ntoy-mount /toy || echo 'fmcluster: toy mount failed'" in user_data
    assert user_data.index("lustre-client") < user_data.index("install-toy-client")
    # Kubernetes: the driver's add-on with its permissions, the volume after it
    addons = {r["Properties"]["AddonName"]: lid for lid, r in resources_of(cluster, "AWS::EKS::Addon").items()}
    assert {"aws-fsx-csi-driver", "toy-csi-driver"} <= set(addons)
    volume = next(r for lid, r in cluster["Resources"].items() if lid.startswith("EksObjectsToyStore"))
    assert addons["toy-csi-driver"] in volume["DependsOn"]
    assert "toy.csi.example.com" in json.dumps(volume) and "toy-volume" in json.dumps(volume)
    listing = [s for s in policy_statements(cluster) if s.get("Sid") == "ToyBucketList"]
    assert len(listing) == 2, "the driver's Pod Identity role and the nodes' role (EKS: the node role)"
    assert all(s["Resource"] == "arn:aws:s3:::toy-bucket" for s in listing)


def test_the_lifecycle_parameters_carry_a_store_the_nodes_mount():
    from helpers.storage import fsx_mounts

    from fmcluster.platforms.storage import HYPERPOD, Mounts

    fsx = fsx_mounts()
    toy = Mount(store="toy", id="ToyStore", path="/toy", fstype="fuse.toy", source="s3://b/", lifecycle={"x": 1})
    mounts = Mounts(stores=(*fsx.stores, TOY), mounts=(*fsx.mounts, toy))
    assert mounts.lifecycle_parameters(mounts.mounted_by_nodes(HYPERPOD)) == {"fsx": None, "toy": {"x": 1}}


def test_the_store_folder_holds_its_settings_construct_builder_mount_change_rules_checks_status_and_figures():
    assert {p.name for p in STORE_FOLDER.glob("*.py")} == {"__init__.py", "settings.py", "construct.py", "resources.py",
                                                           "mount.py", "changes.py", "preflight.py", "status.py",
                                                           "figures.py", "facts.py"}
    assert not (PACKAGE / "constructs" / "fsx_lustre.py").exists()
    assert type(registry.stores()[0]).__module__ == "fmcluster.platforms.storage.fsx_lustre"

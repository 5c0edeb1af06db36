"""The storage contract as data: the forms a store hands every kind, rendered the way each consumer renders them, and
FSx for Lustre's mount in each form. Offline, no synth."""

from __future__ import annotations

import shlex

import pytest
from helpers.storage import fsx_mounts, no_mounts

from fmcluster import images
from fmcluster.platforms.storage import HYPERPOD, PARALLELCLUSTER, CsiAddon, Mounts, Store
from fmcluster.platforms.storage.forms import Arn, BootMount, Mount, NodeClient, Permission
from fmcluster.platforms.storage.fsx_lustre import STORE as FSX
from fmcluster.registry import stores


def test_the_registry_lists_fsx_for_lustre_first_with_its_declaration():
    assert stores()[0] == FSX
    assert (FSX.name, FSX.spec_key, FSX.lifecycle_key) == ("fsx-lustre", "fsx", "fsx")
    addon = FSX.csi_addon
    assert (addon.name, addon.service_account, addon.always, addon.node_millicores) == (
        "aws-fsx-csi-driver", "fsx-csi-controller-sa", True, 30)


def test_boot_lines_install_the_client_where_the_image_lacks_it_then_mount_and_report():
    boot = BootMount(command="mount-x /data", failure="x mount failed", efa_command="mount-x --efa /data",
                     client=NodeClient("x-client", install={"with": "", "without": "install-x\n"}))
    assert boot.shell(image="with") == "mount-x /data || echo 'fmcluster: x mount failed'\n"
    assert boot.shell(image="without", efa=True).startswith("install-x\nmount-x --efa /data || ")
    fatal = boot.shell(image="with", fatal_under_fail=True)
    assert "if [ \"${FMCLUSTER_POLICY:-fail}\" = fail ]; then echo 'fmcluster: policy fail'; exit 1; fi" in fatal
    with pytest.raises(ValueError, match="no way to install x-client on 'other'"):
        boot.shell(image="other")
    with pytest.raises(ValueError, match="single quotes"):
        BootMount(command="m", failure="it's broken")


def test_a_mount_is_checked_and_says_its_mount_command():
    m = Mount(store="s", id="Shared", path="/data", fstype="fuse", source="s3://b/p/", options=("ro", "allow_other"))
    assert m.command == "mount -t fuse -o ro,allow_other s3://b/p/ /data"
    for bad in ({"id": "shared"}, {"path": "/"}, {"path": "data"}, {"services": {"slurm": {}}}):
        with pytest.raises(ValueError):
            Mount(**{"store": "s", "id": "Shared", "path": "/data", "fstype": "fuse", "source": "x", **bad})
    with pytest.raises(ValueError, match="one by one"):
        Permission("All", ("s3:*",), ())
    with pytest.raises(ValueError, match="has a wildcard resource; say why"):
        Permission("Objects", ("s3:GetObject",), (Arn("s3", "bucket/*", regional=False),))


def test_permissions_render_regional_and_global_arns():
    p = Permission("Read", ("s3:GetObject",), (Arn("s3", "bucket/prefix/*", regional=False), Arn("fsx", "file-system/fs-1")),
                   why="objects below the prefix")
    assert p.arns(partition="aws", region="us-east-1", account="123456789012") == [
        "arn:aws:s3:::bucket/prefix/*", "arn:aws:fsx:us-east-1:123456789012:file-system/fs-1"]
    whole = Arn("kms", "arn:aws:kms:eu-west-1:111122223333:key/k", whole=True)
    assert whole.render(partition="aws", region="us-east-1", account="123456789012") == whole.resource


def test_fsx_for_lustre_fills_every_form():
    (plain,) = fsx_mounts(dns_name="fs-1.fsx", mount_name="abc", mount_point="/fsx", file_system_id="fs-1")
    assert plain.command == "mount -t lustre -o noatime,flock fs-1.fsx@tcp:/abc /fsx"
    assert plain.boot is not None and plain.boot.efa_command is None
    line = plain.boot.shell(image="dlami-ubuntu-22.04", efa=True)  # a TCP file system: no EFA flag on EFA nodes
    words = shlex.split(line.split("||")[0])
    assert words[:4] == ["PYTHONPATH=/opt/fmcluster/pkg", "python3", "-m", "fmcluster.runtime.lustre"]
    assert "--efa" not in words and words[-1] == "--fstab"
    assert all(plain.boot.client.install_on(f) == "" for f in images.FAMILIES)  # every DLAMI ships the client
    assert "dnf install -y -q lustre-client" in plain.boot.shell(image="eks-al2023")
    assert plain.services[HYPERPOD] == {"FsxLustreConfig": {"DnsName": "fs-1.fsx", "MountName": "abc", "MountPath": "/fsx"}}
    assert plain.services[PARALLELCLUSTER]["FsxLustreSettings"] == {"FileSystemId": "fs-1"}
    assert plain.kubernetes is not None and plain.kubernetes.handle == "fs-1"
    assert plain.kubernetes.attributes == {"dnsname": "fs-1.fsx", "mountname": "abc"}
    assert plain.lifecycle == {"dns_name": "fs-1.fsx", "mount_name": "abc", "mount_point": "/fsx", "efa": False}
    (efa,) = fsx_mounts(efa=True)
    assert efa.boot is not None and "--efa" in efa.boot.shell(image="dlami-al2023", efa=True)
    assert "--efa" not in efa.boot.shell(image="dlami-al2023", efa=False)  # a login or CPU node: over TCP
    assert HYPERPOD not in efa.services, "LNet over EFA is set up by fmcluster's helper only: the nodes mount it"


def test_a_mount_without_a_lifecycle_form_has_no_key_of_its_own():
    """HyperPod's platform lists it by its boot form or refuses it (tests/platforms/hyperpod/test_lifecycle_mounts.py)."""
    no_form = Mount(store="s", id="S", path="/s", fstype="fuse", source="s3://b/")
    assert no_mounts().lifecycle_parameters([no_form]) == {"fsx": None}


def test_lifecycle_parameters_name_every_store_null_where_the_nodes_do_not_mount_it():
    plain, efa = fsx_mounts(), fsx_mounts(efa=True)
    assert no_mounts().lifecycle_parameters([]) == {"fsx": None}
    assert plain.lifecycle_parameters(plain.mounted_by_nodes(HYPERPOD)) == {"fsx": None}  # HyperPod mounts it
    assert efa.lifecycle_parameters(efa.mounted_by_nodes(HYPERPOD))["fsx"]["efa"] is True
    assert plain.lifecycle_parameters(plain.mounted_by_nodes())["fsx"]["mount_point"] == "/fsx"  # HyperPod on EKS
    assert [m.store for m in plain.served_by(PARALLELCLUSTER)] == ["fsx-lustre"]


def test_csi_addons_are_every_always_installed_one_and_those_a_mount_uses():
    (addon, permissions), = no_mounts().csi_addons()
    assert addon.name == "aws-fsx-csi-driver" and permissions == ()  # installed since the first release
    (addon, permissions), = fsx_mounts(file_system_id="fs-1").csi_addons()
    assert [p.sid for p in permissions] == ["DescribeTheClusterFileSystem"]
    optional = CsiAddon("other-csi", service_account="sa")
    other = Store(name="other", title="Other", spec_key="other", resources="other", csi_addon=optional)
    assert [a.name for a, _ in Mounts(stores=(FSX, other)).csi_addons()] == ["aws-fsx-csi-driver"]


def test_a_kubernetes_kind_refuses_a_mount_without_a_volume_form():
    bare = Mount(store="bare", id="Bare", path="/bare", fstype="nfs", source="x:/")
    with pytest.raises(ValueError, match="store bare has no Kubernetes volume form"):
        Mounts(mounts=(bare,)).volumes()


def test_reading_a_spec_builds_the_stores_declarations_but_none_of_the_mount_forms():
    """`validate` and `plan` start in a fresh interpreter: the contract's forms (forms.py) and the stores' mounts are
    built only at synth, so reading a spec pays for the declarations alone (bench/command_startup.py)."""
    import subprocess
    import sys

    from helpers import ROOT

    code = ("import sys; from fmcluster.registry import load_spec; load_spec(sys.argv[1]); "
            "print('\\n'.join(m for m in sys.modules if m.startswith('fmcluster.platforms.storage')))")
    loaded = subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "eks-p5.yaml")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert "fmcluster.platforms.storage" in loaded and "fmcluster.platforms.storage.fsx_lustre" in loaded
    assert not [m for m in loaded if m.endswith((".forms", ".mount"))], loaded

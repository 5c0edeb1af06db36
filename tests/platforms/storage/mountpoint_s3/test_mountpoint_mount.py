"""Mountpoint for Amazon S3's mount in each form of the storage contract, from plain values (no synth): the boot
lines (the pinned client installed only when its signature checks out, the fstab line, the mount under a timeout), the
CSI volume, and least-privilege permissions for every way the spec can ask for the bucket."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from fmcluster import images
from fmcluster.platforms.hyperpod.mounts import EKS_IMAGE, IMAGES, SLURM_IMAGE
from fmcluster.platforms.storage import HYPERPOD, PARALLELCLUSTER
from fmcluster.platforms.storage.mountpoint_s3.mount import (
    CLIENT,
    KEY_FINGERPRINT,
    OPERATING_SYSTEMS,
    RPM,
    VERSION,
    Bucket,
    Options,
    s3_mount,
)

KEY = "arn:aws:kms:us-east-1:111122223333:key/11111111-2222-3333-4444-555555555555"
ARNS = {"partition": "aws", "region": "us-east-1", "account": "111122223333"}


def statements(mount, attr="node_permissions"):
    return {p.sid: (p.actions, p.arns(**ARNS), dict(p.conditions)) for p in getattr(mount, attr)}


def test_a_read_only_prefix_lists_and_reads_below_it_only():
    m = s3_mount(Bucket("datasets", key_arn=KEY), Options("/datasets", prefix="train/"))
    assert statements(m) == {
        "MountpointS3List": (("s3:ListBucket",), ["arn:aws:s3:::datasets"], {"StringLike": {"s3:prefix": ["train/*"]}}),
        "MountpointS3Objects": (("s3:GetObject",), ["arn:aws:s3:::datasets/train/*"], {}),
        "MountpointS3Key": (("kms:Decrypt",), [KEY], {}),
    }
    assert statements(m, "node_permissions").keys() == {"MountpointS3List", "MountpointS3Objects", "MountpointS3Key"}
    assert {p.actions for p in m.kubernetes.driver_permissions} == {p.actions for p in m.node_permissions}


def test_writes_add_put_and_abort_and_delete_only_where_asked_and_the_key_makes_data_keys():
    write = statements(s3_mount(Bucket("ckpt", key_arn=KEY), Options("/ckpt", read_only=False)))
    assert write["MountpointS3Objects"][0] == ("s3:GetObject", "s3:AbortMultipartUpload", "s3:PutObject")
    assert write["MountpointS3List"][2] == {}, "the whole bucket: no prefix condition"
    assert write["MountpointS3Key"][0] == ("kms:Decrypt", "kms:GenerateDataKey")
    delete = statements(s3_mount(Bucket("ckpt"), Options("/ckpt", read_only=False, allow_delete=True)))
    assert "s3:DeleteObject" in delete["MountpointS3Objects"][0]
    assert "MountpointS3Key" not in delete, "no key named: S3's own encryption needs no KMS permission"


def test_a_directory_bucket_is_reached_through_its_session():
    m = s3_mount(Bucket("ckpt--use1-az4--x-s3", directory=True, key_arn=KEY), Options("/ckpt", read_only=False))
    assert statements(m)["MountpointS3Session"] == (
        ("s3express:CreateSession",), ["arn:aws:s3express:us-east-1:111122223333:bucket/ckpt--use1-az4--x-s3"], {})
    assert not [p for p in m.node_permissions if p.actions[0].startswith("s3:")]


def test_the_mount_as_mount8_fstab_and_the_csi_driver_take_it():
    o = Options("/data", prefix="d/", read_only=False, allow_overwrite=True, allow_delete=True,
                cache_directory="/opt/dlami/nvme/s3-cache", max_cache_size_mib=1024, metadata_ttl_seconds=60)
    m = s3_mount(Bucket("b", region="us-east-1"), o)
    assert (m.fstype, m.source, m.path) == ("mount-s3", "s3://b/d/", "/data")
    assert m.command == ("mount -t mount-s3 -o rw,allow-other,region=us-east-1,allow-overwrite,allow-delete,"
                         "cache=/opt/dlami/nvme/s3-cache,max-cache-size=1024,metadata-ttl=60 s3://b/d/ /data")
    assert ("echo 's3://b/d/ /data mount-s3 _netdev,nosuid,nodev,nofail,rw,allow-other,region=us-east-1,"
            "allow-overwrite,allow-delete,cache=/opt/dlami/nvme/s3-cache,max-cache-size=1024,metadata-ttl=60 0 0' "
            ">> /etc/fstab") in m.boot.command
    assert "mkdir -p /data /opt/dlami/nvme/s3-cache" in m.boot.command
    assert "timeout 120 mount /data" in m.boot.command
    volume = m.kubernetes
    assert (volume.driver, volume.addon, volume.claim, dict(volume.attributes)) == (
        "s3.csi.aws.com", "aws-mountpoint-s3-csi-driver", "s3", {"bucketName": "b"})
    assert volume.mount_options == ("region us-east-1", "prefix d/", "allow-overwrite", "allow-delete",
                                    "metadata-ttl 60")
    owned = s3_mount(Bucket("b"), Options("/data", read_only=False, uid=1000, gid=1000))
    assert owned.options == ("rw", "allow-other", "uid=1000", "gid=1000")
    assert owned.kubernetes.mount_options == ("uid 1000", "gid 1000")
    read_only = s3_mount(Bucket("b"), Options("/data"))
    assert read_only.kubernetes.mount_options == ("read-only",)
    assert read_only.options[0] == "ro"


def test_no_service_mounts_it_and_hyperpod_nodes_mount_it_from_its_boot_form():
    m = s3_mount(Bucket("b"), Options("/data"))
    assert HYPERPOD not in m.services and PARALLELCLUSTER not in m.services
    assert m.lifecycle is None, "no entry of its own: the lifecycle parameters' list carries its boot form"


def test_every_image_installs_the_pinned_client():
    assert set(CLIENT.install) == {*images.FAMILIES, "eks-al2023", *OPERATING_SYSTEMS, *IMAGES}
    for image, lines in CLIENT.install.items():
        assert f"mount-s3-{VERSION}-" in lines and KEY_FINGERPRINT in lines, image
        ubuntu = "ubuntu" in image or image == SLURM_IMAGE
        assert ("apt-get install" in lines) == ubuntu, image
    assert "$(command -v dnf || command -v yum) install -y -q ./p.rpm" in CLIENT.install[EKS_IMAGE], \
        "Amazon Linux 2 has yum, 2023 dnf"


FAKE_MOUNT = """#!/bin/sh
case "$(basename "$0")" in
  mountpoint) exit 1 ;;
  mount) echo "$*" >> "$MOUNTS" ;;
esac
"""


def run_boot_command(tmp_path: Path, prefix: str) -> subprocess.CompletedProcess:
    """The boot command as a node runs it, on a real fstab file in tmp_path (mount and mountpoint faked)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("mount", "mountpoint"):
        (bin_dir / name).write_text(FAKE_MOUNT)
        (bin_dir / name).chmod(0o755)
    point = str(tmp_path / "s3.data")
    command = s3_mount(Bucket("b"), Options(point, prefix=prefix)).boot.command
    command = command.replace("/etc/fstab", str(tmp_path / "fstab"))
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                               "MOUNTS": str(tmp_path / "mounts.log")})


def test_the_fstab_line_is_added_once_and_replaced_when_the_prefix_changes(tmp_path: Path):
    fstab = tmp_path / "fstab"
    others = f"/dev/sda1 / ext4 defaults 0 0\ns3://b/x/ {tmp_path}/s3Xdata mount-s3 _netdev,ro 0 0\n"
    fstab.write_text(others)
    point = f"{tmp_path}/s3.data"
    for _ in range(2):
        assert run_boot_command(tmp_path, "train/").returncode == 0
    first = fstab.read_text()
    assert first == others + f"s3://b/train/ {point} mount-s3 _netdev,nosuid,nodev,nofail,ro,allow-other 0 0\n", \
        "a rerun adds nothing; another mount point (the '.' is no wildcard) is left alone"
    assert run_boot_command(tmp_path, "eval/").returncode == 0
    assert fstab.read_text() == others + f"s3://b/eval/ {point} mount-s3 _netdev,nosuid,nodev,nofail,ro,allow-other 0 0\n"
    assert (tmp_path / "mounts.log").read_text().splitlines() == [point] * 3


def test_a_node_without_an_fstab_gets_one(tmp_path: Path):
    assert run_boot_command(tmp_path, "").returncode == 0
    assert (tmp_path / "fstab").read_text().startswith("s3://b/ ")
    steps = RPM.split(" && ")
    for command in ("curl", "gpg", "dnf"):
        runs = [step for step in steps if f" {command} " in f" {step} " and not step.startswith("export")]
        assert runs and all(step.startswith("timeout ") for step in runs), command


def test_the_boot_lines_parse():
    m = s3_mount(Bucket("b"), Options("/data", cache_directory="/opt/dlami/nvme/c"))
    for image in CLIENT.install:
        script = m.boot.shell(image=image, fatal_under_fail=True)
        r = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr


STUB = """#!/bin/sh
case "$(basename "$0")" in
  curl) while [ $# -gt 0 ]; do [ "$1" = -o ] && { echo data > "$2"; shift; }; shift; done ;;
  gpg) case "$*" in *--verify*) echo "[GNUPG:] VALIDSIG $SIGNER 2026-01-01 0 4 0 1 10 00 $SIGNER" ;; esac ;;
  dnf) echo "$*" > "$MARKER" ;;
esac
"""


@pytest.mark.parametrize("signer, installs", [(KEY_FINGERPRINT, True), ("0" * 40, False)])
def test_the_package_is_installed_only_when_the_pinned_key_signed_it(tmp_path: Path, signer, installs):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("curl", "gpg", "dnf"):
        tool = bin_dir / name
        tool.write_text(STUB)
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    marker = tmp_path / "installed"
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "SIGNER": signer, "MARKER": str(marker),
           "TMPDIR": str(tmp_path)}
    r = subprocess.run(["bash", "-c", RPM], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert marker.exists() is installs
    if installs:
        assert marker.read_text().startswith("install -y -q ./p.rpm")
    else:
        assert f"fmcluster: mount-s3 {VERSION} install failed" in r.stdout

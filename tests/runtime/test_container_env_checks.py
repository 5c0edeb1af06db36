"""containers.data_root and comm.env_hygiene on fixture nodes, healthy and broken."""

from __future__ import annotations

import os

import pytest

from fmcluster.runtime.checks.communication import _ifname_matches
from fmcluster.runtime.checks.containers import static_prefix

from .conftest import TYPES, copy_node

DAEMON = "/etc/docker/daemon.json"
ENROOT = "/etc/enroot/enroot.conf"


# ---- containers.data_root -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("itype", TYPES)
def test_container_data_on_nvme_passes(tmp_path, itype):
    node = copy_node(tmp_path, itype)
    res = node.run("--level", "fast")
    c = res.check("containers.data_root")
    assert c["status"] == "pass", c
    assert c["layer"] == "containers"
    assert "docker data-root /opt/dlami/nvme/docker/data-root" in c["observed"]
    assert "ENROOT_CACHE_PATH" in c["observed"] and "ENROOT_DATA_PATH" in c["observed"]


def test_docker_data_root_on_root_volume_fails(p5):
    p5.write(DAEMON, '{"data-root": "/var/lib/docker-images", "runtimes": {}}\n')
    res = p5.run("--level", "fast")
    assert res.rc == 1
    assert res.not_passing() == {"containers.data_root": "fail"}
    c = res.check("containers.data_root")
    assert "docker data-root /var/lib/docker-images (/etc/docker/daemon.json data-root) on / " in c["observed"]
    assert "docker-config" in c["remedy"]


def test_no_daemon_json_means_var_lib_docker_on_root(p5):
    p5.remove(DAEMON)
    res = p5.run("--level", "fast")
    assert res.not_passing() == {"containers.data_root": "fail"}
    assert "docker data-root /var/lib/docker (default" in res.check("containers.data_root")["observed"]


def test_no_docker_and_no_enroot_is_a_skip(p5):
    for p in ("/etc/docker", "/usr/bin/dockerd", "/etc/enroot"):
        p5.remove(p)
    res = p5.run("--level", "fast")
    assert res.rc == 0, res.stdout
    assert res.status("containers.data_root") == "skip"


def test_garbled_daemon_json_is_an_error_naming_the_file(p5):
    p5.write(DAEMON, '{"data-root": "/opt/dlami/nvme/docker/data-root",\n')
    res = p5.run("--level", "fast")
    c = res.check("containers.data_root")
    assert c["status"] == "error"
    assert "/etc/docker/daemon.json is not valid JSON" in c["observed"]
    assert "/etc/docker/daemon.json" in c["remedy"]


def test_enroot_cache_on_root_volume_fails(p5):
    conf = (p5.root / ENROOT.lstrip("/")).read_text()
    p5.write(ENROOT, conf.replace("ENROOT_CACHE_PATH /opt/dlami/nvme/enroot/cache",
                                  "#ENROOT_CACHE_PATH          ${XDG_CACHE_HOME}/enroot"))
    res = p5.run("--level", "fast")
    assert res.not_passing() == {"containers.data_root": "fail"}
    c = res.check("containers.data_root")
    assert "enroot ENROOT_CACHE_PATH ${XDG_CACHE_HOME}/enroot -> /home (default" in c["observed"]
    assert "ENROOT_DATA_PATH" not in c["observed"].split(";")[0]


def test_enroot_drop_in_on_root_volume_fails(p5):
    p5.write("/etc/enroot/enroot.conf.d/10-site.conf", "ENROOT_DATA_PATH=/var/lib/enroot/data\n")
    res = p5.run("--level", "fast")
    assert res.status("containers.data_root") == "fail"
    assert "/etc/enroot/enroot.conf.d/10-site.conf" in res.check("containers.data_root")["observed"]


def test_symlink_into_nvme_counts_as_nvme(p5):
    p5.write(DAEMON, '{"data-root": "/var/lib/docker"}\n')
    (p5.root / "var/lib").mkdir(parents=True, exist_ok=True)
    os.symlink("/opt/dlami/nvme/docker/data-root", p5.root / "var/lib/docker")
    res = p5.run("--level", "fast")
    c = res.check("containers.data_root")
    assert c["status"] == "pass", c
    assert "/var/lib/docker -> /opt/dlami/nvme/docker/data-root" in c["observed"]


def test_nvme_not_mounted_puts_docker_on_root(p5):
    mounts = (p5.root / "proc/mounts").read_text()
    p5.write("/proc/mounts", "".join(ln + "\n" for ln in mounts.splitlines() if "/opt/dlami/nvme" not in ln))
    res = p5.run("--level", "fast")
    assert res.status("storage.instance_store") == "fail"
    c = res.check("containers.data_root")
    assert c["status"] == "fail" and "is not mounted" in c["remedy"]


def test_other_volume_is_a_warning(p5):
    p5.append("/proc/mounts", "/dev/nvme1n1 /opt/sagemaker ext4 rw,relatime 0 0\n")
    p5.write(DAEMON, '{"data-root": "/opt/sagemaker/docker/data-root"}\n')
    res = p5.run("--level", "fast")
    assert res.rc == 0
    assert res.status("containers.data_root") == "warn"


def test_containerd_image_store_root_is_checked(p5):
    p5.write(DAEMON, '{"data-root": "/opt/dlami/nvme/docker/data-root", "features": {"containerd-snapshotter": true}}')
    res = p5.run("--level", "fast")
    c = res.check("containers.data_root")
    assert c["status"] == "fail" and "containerd root /var/lib/containerd" in c["observed"]
    p5.write("/etc/containerd/config.toml", 'version = 2\nroot = "/opt/dlami/nvme/containerd"\n[plugins]\n')
    assert p5.run("--level", "fast").status("containers.data_root") == "pass"


def test_no_instance_store_type_does_not_apply(p5):
    res = p5.run("--level", "fast", profile=p5.profile(instance_store=None))
    assert res.status("containers.data_root") == "skip"


@pytest.mark.parametrize("value, prefix", [
    ("/opt/dlami/nvme/enroot/data/user-${UID}", "/opt/dlami/nvme/enroot/data"),
    ("${XDG_DATA_HOME}/enroot", "/home"),
    ("~/.cache/enroot", "/home"),
    ("/var/lib/docker/", "/var/lib/docker"),
    ("relative/path", None),
])
def test_static_prefix(value, prefix):
    assert static_prefix(value) == prefix


# ---- comm.env_hygiene -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("itype", TYPES)
def test_clean_environment_passes(tmp_path, itype):
    node = copy_node(tmp_path, itype)
    res = node.run("--level", "fast")
    assert res.status("comm.env_hygiene") == "pass"


def test_nccl_net_socket_in_etc_environment_fails(p5):
    p5.append("/etc/environment", "NCCL_NET=Socket\n")
    res = p5.run("--level", "fast")
    assert res.rc == 1
    assert res.not_passing() == {"comm.env_hygiene": "fail"}
    c = res.check("comm.env_hygiene")
    assert "NCCL_NET=Socket (/etc/environment:2)" in c["observed"] and "TCP" in c["observed"]


def test_nccl_proto_simple_in_profile_d_warns(p5):
    p5.write("/etc/profile.d/nccl.sh", "# old EFA recipe\nexport NCCL_PROTO=simple\nexport FI_PROVIDER=efa\n")
    res = p5.run("--level", "fast")
    assert res.rc == 0
    c = res.check("comm.env_hygiene")
    assert c["status"] == "warn"
    assert "NCCL_PROTO=simple (/etc/profile.d/nccl.sh:2)" in c["observed"]
    assert "FI_PROVIDER=efa (/etc/profile.d/nccl.sh:3)" in c["detail"]


def test_socket_ifname_naming_a_missing_interface_fails(make_node):
    node = make_node("p5en.48xlarge")
    node.append("/etc/environment", 'NCCL_SOCKET_IFNAME="=eth0"\n')
    res = node.run("--level", "fast")
    c = res.check("comm.env_hygiene")
    assert c["status"] == "fail"
    assert "NCCL_SOCKET_IFNAME==eth0 (/etc/environment:2): matches no interface" in c["observed"]
    assert "enp71s0" in c["observed"]


def test_socket_ifname_prefix_of_an_existing_interface_passes(make_node):
    node = make_node("p5en.48xlarge")
    node.write("/etc/profile.d/nccl.sh", "export NCCL_SOCKET_IFNAME=enp\n")
    assert node.run("--level", "fast").status("comm.env_hygiene") == "pass"


@pytest.mark.parametrize("line, status", [
    ("FI_PROVIDER=tcp", "fail"),
    ("FI_PROVIDER=^efa", "fail"),
    ("FI_PROVIDER=efa", "pass"),
    ("NCCL_NET_PLUGIN=none", "fail"),
    ('NCCL_NET="AWS Libfabric"', "pass"),
    ("NCCL_NET=IB", "warn"),
    ("FI_EFA_USE_DEVICE_RDMA=0", "warn"),
    ("FI_EFA_USE_DEVICE_RDMA=1", "pass"),
    ("RDMAV_FORK_SAFE=1", "warn"),
    ("NCCL_P2P_DISABLE=1", "warn"),
    ("NCCL_IB_DISABLE=1", "pass"),
    ("NCCL_DEBUG=WARN", "pass"),
])
def test_env_rules(p5, line, status):
    p5.write("/etc/nccl.conf", line + "\n")
    assert p5.run("--level", "fast").status("comm.env_hygiene") == status


def test_profile_d_lines_without_export_are_ignored(p5):
    p5.write("/etc/profile.d/local.sh", "NCCL_NET=Socket\n")
    assert p5.run("--level", "fast").status("comm.env_hygiene") == "pass"


@pytest.mark.parametrize("spec, ok", [
    ("ens", True), ("=ens32", True), ("=ens3", False), ("eth0,ens32", True), ("eth", False), ("^docker,lo", True),
    ("^=ens32", True),
])
def test_ifname_matching(spec, ok):
    assert _ifname_matches(spec, ["ens32", "lo"]) is ok


def test_relative_symlink_with_dotdot_is_followed(p5):
    p5.remove(DAEMON)
    (p5.root / "var/lib").mkdir(parents=True, exist_ok=True)
    os.symlink("../../opt/dlami/nvme/docker/data-root", p5.root / "var/lib/docker")
    c = p5.run("--level", "fast").check("containers.data_root")
    assert c["status"] == "pass", c

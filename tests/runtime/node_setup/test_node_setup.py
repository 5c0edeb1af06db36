"""fmcluster.runtime.node_setup: the node-side decisions against HyperPod's resource_config.json format, our
parameters and the files a node holds (fstab, daemon.json, enroot.conf)."""

from __future__ import annotations

import json
import re

import pytest
from helpers.lifecycle import CONTROLLER_IP, CPU_IP, GPU_IP, LOGIN_IP, eks_params, params, resource_config

from fmcluster.runtime.node_setup import cli, containers, efa_units, identity, parameters, storage
from fmcluster.runtime.node_setup.files import SetupError


@pytest.mark.parametrize("ip, role, group, partition, gpu", [
    (CONTROLLER_IP, "controller", "controller", "", "0"),
    (LOGIN_IP, "login", "login", "", "0"),
    (GPU_IP, "compute", "gpu-a", "gpu-a", "1"),
    (CPU_IP, "compute", "cpu-b", "cpu-b", "0"),
])
def test_role_comes_from_the_instance_group_holding_this_address(ip, role, group, partition, gpu):
    p = identity.whoami(resource_config(), params(), ["192.168.9.9", ip])
    assert (p["role"], p["group"], p["partition"], p["gpu"]) == (role, group, partition, gpu)
    assert p["node_ip"] == ip
    assert p["controller_ips"] == CONTROLLER_IP


def test_plan_carries_every_setting_the_steps_need():
    p = identity.whoami(resource_config(), params(), [GPU_IP])
    assert p["instance_type"] == "ml.p5.48xlarge" and p["instance_name"] == "gpu-a-2"
    assert (p["fsx"], p["fsx_dns_name"], p["fsx_mount_name"], p["fsx_mount_point"], p["fsx_efa"]) == (
        "1", "fs-0abc.fsx.us-east-1.amazonaws.com", "abcdefgh", "/fsx", "0")
    got = (p["level"], p["policy"], p["observability"], p["scrape_interval"], p["users"])
    assert got == ("standard", "drain", "1", "30", "1")
    bare = identity.whoami(resource_config(), params(fsx=None, observability=None, users=[], validation=None), [GPU_IP])
    assert (bare["fsx"], bare["observability"], bare["users"], bare["policy"]) == ("0", "0", "0", "drain")



@pytest.mark.parametrize("ip, over_efa", [(GPU_IP, "1"), (CONTROLLER_IP, "0"), (CPU_IP, "0"), (LOGIN_IP, "0")])
def test_only_nodes_with_efa_mount_an_efa_file_system_over_efa(ip, over_efa):
    """LNet over EFA needs EFA on this node; the others reach the same file system over TCP."""
    fsx = {"dns_name": "fs-0abc.fsx.us-east-1.amazonaws.com", "mount_name": "abcdefgh", "mount_point": "/fsx", "efa": True}
    assert identity.whoami(resource_config(), params(fsx=fsx), [ip])["fsx_efa"] == over_efa

def test_hostname_is_the_fallback_when_no_address_matches():
    assert identity.whoami(resource_config(), params(), ["192.168.9.9"], "ip-10-1-2-21")["group"] == "cpu-b"
    assert identity.whoami(resource_config(), params(), [], "login-1.ec2.internal")["role"] == "login"


def test_a_node_missing_from_resource_config_is_a_clear_error():
    with pytest.raises(SetupError, match="192.168.9.9.*not in resource_config.json"):
        identity.whoami(resource_config(), params(), ["192.168.9.9"], "somehost")


def test_a_group_missing_from_the_parameters_is_a_clear_error():
    with pytest.raises(SetupError, match="'login' is neither"):
        identity.whoami(resource_config(), params(login_group=None), [LOGIN_IP])


def test_duplicate_address_is_refused():
    rc = resource_config()
    rc["InstanceGroups"][3]["Instances"][0]["CustomerIpAddress"] = GPU_IP
    with pytest.raises(SetupError, match="appears 2 times"):
        identity.whoami(rc, params(), [GPU_IP])


@pytest.mark.parametrize("change, message", [
    ({"version": "1.0.0"}, "version must be 1"),
    ({"workload_manager": "eks"}, "workload_manager"),
    ({"worker_groups": []}, "worker_groups must be a non-empty list"),
    ({"validation": {"level": "standard", "policy": "reboot"}}, "validation.policy"),
    ({"fsx": {"dns_name": "d", "mount_name": "m", "mount_point": "fsx"}}, "mount_point must be an absolute path"),
    ({"observability": {"remote_write_url": "http://x"}}, "https://"),
    ({"users": [{"name": "bob"}]}, "uid must be an integer"),
    ({"users": [{"name": "Bob!", "uid": 2000}]}, "name must match"),
    ({"users": [{"name": "bob", "uid": 2000}, {"name": "carol", "uid": 2000}]}, "used twice"),
    ({"users": [{"name": "bob", "uid": 2000, "ssh_public_keys": ["not a key"]}]}, "OpenSSH public keys"),
    ({"cluster_name": "a\tb"}, "tab, newline"),
    # a key the synth side writes and this node does not know is contract drift, refused by name
    ({"gpu_count": 8}, r"fmcluster_parameters.json: unknown key\(s\) gpu_count"),
    ({"worker_groups": [{"instance_group_name": "w", "partition_name": "w", "instance_type": "ml.p5.48xlarge",
                         "gpu": True, "efa": True, "nvme": True}]}, r"worker_groups\[0\]: unknown key\(s\) nvme"),
])
def test_bad_parameters_name_the_field(change, message):
    with pytest.raises(SetupError, match=message):
        parameters.validate_params(params(**change))


def test_local_addresses_read_fib_trie(tmp_path):
    (tmp_path / "proc/net").mkdir(parents=True)
    (tmp_path / "proc/net/fib_trie").write_text(
        "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n"
        "     +-- 10.1.0.0/16 2 0 2\n        |-- 10.1.1.12\n           /32 host LOCAL\n"
        "        |-- 10.1.255.255\n           /32 link BROADCAST\n"
        "     |-- 127.0.0.1\n        /32 host LOCAL\n")
    assert "10.1.1.12" in identity.local_addresses(str(tmp_path))
    assert not [a for a in identity.local_addresses(str(tmp_path)) if a.startswith("127.") or a == "10.1.255.255"]


def _mounts(tmp_path, *lines):
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "proc/mounts").write_text("".join(line + "\n" for line in lines))
    return str(tmp_path)


def test_storage_root_prefers_nvme_then_the_sagemaker_volume_never_root(tmp_path):
    root = "/dev/nvme0n1p1 / ext4 rw 0 0"
    assert storage.storage_root(_mounts(tmp_path, root, "/dev/md0 /opt/dlami/nvme ext4 rw 0 0",
                                     "/dev/nvme1n1 /opt/sagemaker ext4 rw 0 0"))[0] == "/opt/dlami/nvme"
    assert storage.storage_root(_mounts(tmp_path, root, "/dev/nvme1n1 /opt/sagemaker ext4 rw 0 0"))[0] == "/opt/sagemaker"
    path, why = storage.storage_root(_mounts(tmp_path, root))
    assert path is None and "neither" in why
    # a bind mount of the root device is still the root volume
    assert storage.storage_root(_mounts(tmp_path, root, "/dev/nvme0n1p1 /opt/dlami/nvme ext4 rw 0 0"))[0] is None


def test_docker_config_merges_and_is_idempotent(tmp_path):
    f = tmp_path / "etc/docker/daemon.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}))
    assert containers.docker_config(str(f), "/opt/dlami/nvme/docker/data-root") is True
    data = json.loads(f.read_text())
    assert data["data-root"] == "/opt/dlami/nvme/docker/data-root" and data["default-runtime"] == "nvidia"
    # images follow data-root only with the classic store (containerd's store lives under /var/lib/containerd)
    assert data["features"] == {"containerd-snapshotter": False}
    assert containers.docker_config(str(f), "/opt/dlami/nvme/docker/data-root") is False


def test_docker_config_keeps_an_explicit_containerd_store_choice(tmp_path):
    f = tmp_path / "daemon.json"
    f.write_text(json.dumps({"features": {"containerd-snapshotter": True, "buildkit": True}}))
    containers.docker_config(str(f), "/opt/dlami/nvme/docker/data-root")
    assert json.loads(f.read_text())["features"] == {"containerd-snapshotter": True, "buildkit": True}


def test_enroot_config_sets_commented_and_missing_keys_once(tmp_path):
    f = tmp_path / "enroot.conf"
    f.write_text("#ENROOT_LIBRARY_PATH /usr/lib/enroot\n#ENROOT_RUNTIME_PATH ${XDG_RUNTIME_DIR}/enroot\n"
                 "ENROOT_CACHE_PATH ${XDG_CACHE_HOME}/enroot\nENROOT_SQUASH_OPTIONS -comp lzo\n")
    assert containers.enroot_config(str(f), "/opt/dlami/nvme") is True
    text = f.read_text()
    assert "ENROOT_RUNTIME_PATH /opt/dlami/nvme/enroot/runtime/user-${UID}\n" in text
    assert "ENROOT_CACHE_PATH /opt/dlami/nvme/enroot/cache\n" in text
    assert "ENROOT_DATA_PATH /opt/dlami/nvme/enroot/data/user-${UID}\n" in text
    assert "ENROOT_TEMP_PATH /opt/dlami/nvme/enroot/tmp\n" in text
    assert "#ENROOT_LIBRARY_PATH" in text and "ENROOT_SQUASH_OPTIONS -comp lzo" in text
    assert text.count("ENROOT_CACHE_PATH") == 1
    assert containers.enroot_config(str(f), "/opt/dlami/nvme") is False


def test_cli_prints_key_tab_value_and_fails_with_one_line(tmp_path, capsys):
    rc_file, p_file = tmp_path / "rc.json", tmp_path / "pp.json"
    rc_file.write_text(json.dumps(resource_config()))
    p_file.write_text(json.dumps(params()))
    assert cli.main(["whoami", "--resource-config", str(rc_file), "--params", str(p_file), "--node-ip", GPU_IP]) == 0
    lines = dict(line.split("\t", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["role"] == "compute" and lines["group"] == "gpu-a"
    assert cli.main(["whoami", "--resource-config", str(tmp_path / "missing.json"), "--params", str(p_file)]) == 1
    assert "resource_config.json not found" in capsys.readouterr().err
    assert cli.main(["users", "--params", str(p_file)]) == 0
    assert capsys.readouterr().out == "alice\t2001\t/home/alice\t/bin/bash\tdocker\n"


# --- HyperPod on EKS ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("group, role, gpu, fsx_efa, efa_textfile", [
    ("h100", "worker", "1", "1", "1"),
    ("prep", "worker", "0", "0", "0"),
    ("system", "system", "0", "0", "0"),
])
def test_an_eks_node_knows_its_group_from_its_entry_script(group, role, gpu, fsx_efa, efa_textfile):
    from helpers.lifecycle import eks_params

    p = identity.eks_node(eks_params(), group)
    assert (p["role"], p["group"], p["gpu"], p["fsx_efa"], p["efa_textfile"]) == (role, group, gpu, fsx_efa, efa_textfile)


@pytest.mark.parametrize("policy, node_policy", [("taint", "report"), ("report", "report"), ("fail", "fail")])
def test_the_node_side_policy_leaves_taint_to_the_node_gate(policy, node_policy):
    from helpers.lifecycle import eks_params

    p = identity.eks_node(eks_params(validation={"level": "fast", "policy": policy}), "h100")
    assert (p["policy"], p["node_policy"], p["level"]) == (policy, node_policy, "fast")


@pytest.mark.parametrize("change, words", [
    ({"workload_manager": "slurm"}, "workload_manager must be 'eks'"),
    ({"validation": {"policy": "drain"}}, "validation.policy must be one of taint, replace, fail, report"),
    ({"system_group": "h100"}, "is also a worker group"),
    ({"controller_group": "controller"}, "fmcluster_parameters.json: unknown key(s) controller_group"),
    ({"observability": {"remote_write_url": "https://x"}}, "observability must be null or an object of efa_textfile"),
    ({"worker_groups": [{"instance_group_name": "h100", "instance_type": "ml.p5.48xlarge", "gpu": "yes", "efa": True}]},
     "worker_groups[0].gpu must be true or false"),
])
def test_bad_eks_parameters_are_refused_with_the_field(change, words):
    from helpers.lifecycle import eks_params

    with pytest.raises(SetupError, match=re.escape(words)):
        parameters.validate_eks_params(eks_params(**change))


def test_container_layout_and_the_fstab_bind_mounts(tmp_path):
    layout = storage.container_layout("/opt/dlami/nvme")
    assert [r[1] for r in layout] == ["/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]
    assert all(dst.startswith("/opt/dlami/nvme/") for _, _, dst in layout)
    with pytest.raises(SetupError):
        storage.container_layout("/")
    fstab = tmp_path / "fstab"
    fstab.write_text("UUID=1 / xfs defaults 0 1\n")
    assert storage.fstab_bind(str(fstab), "/opt/dlami/nvme/kubelet", "/var/lib/kubelet", "/opt/dlami/nvme")
    assert not storage.fstab_bind(str(fstab), "/opt/dlami/nvme/kubelet", "/var/lib/kubelet", "/opt/dlami/nvme")
    assert fstab.read_text().splitlines()[-1] == (
        "/opt/dlami/nvme/kubelet /var/lib/kubelet none bind,x-systemd.requires-mounts-for=/opt/dlami/nvme 0 0")
    with pytest.raises(SetupError, match="already mounts"):
        storage.fstab_bind(str(fstab), "/opt/sagemaker/kubelet", "/var/lib/kubelet", "/opt/sagemaker")
    assert storage.fstab_bind(str(fstab), "/opt/dlami/nvme/containerd", "/var/lib/containerd", "/opt/dlami/nvme",
                           after="dlami-nvme.service")
    assert fstab.read_text().splitlines()[-1].endswith(
        "bind,x-systemd.requires-mounts-for=/opt/dlami/nvme,x-systemd.after=dlami-nvme.service 0 0")
    assert efa_units.write_efa_units(str(tmp_path / "units")) == ["fmcluster-efa-textfile.service",
                                                             "fmcluster-efa-textfile.timer"]


def test_the_entry_scripts_group_needs_no_resource_config():
    p = identity.whoami(None, params(), [GPU_IP], group_name="gpu-a")
    assert (p["role"], p["group"], p["partition"], p["gpu"], p["node_ip"]) == ("compute", "gpu-a", "gpu-a", "1", GPU_IP)
    assert p["controller_ips"] == ""
    assert identity.whoami(None, params(), [], group_name="login")["role"] == "login"
    # a node HyperPod did not list yet still has its group from the entry script
    assert identity.whoami(resource_config(), params(), ["192.168.9.9"], group_name="cpu-b")["group"] == "cpu-b"


def test_resource_config_and_entry_script_must_agree_and_one_of_them_is_needed():
    with pytest.raises(SetupError, match="puts this node in instance group 'gpu-a'"):
        identity.whoami(resource_config(), params(), [GPU_IP], group_name="cpu-b")
    with pytest.raises(SetupError, match="no resource_config.json and no instance group"):
        identity.whoami(None, params(), [GPU_IP])


# /proc/mounts of an EKS AL2023 node once nodeadm's RAID0 strategy has mounted the array (amazon-eks-ami
# setup-local-disks: xfs on /dev/md/kubernetes, mounted on /mnt/k8s-disks/0)
EKS_MOUNTS = ("/dev/nvme0n1p1 / xfs rw,noatime,attr2,inode64,logbufs=8,logbsize=32k,noquota 0 0\n"
              "/dev/md127 /mnt/k8s-disks/0 xfs rw,relatime,attr2,inode64,logbufs=8,logbsize=32k,sunit=1024,"
              "swidth=8192,noquota 0 0\n")


@pytest.mark.parametrize("path, unit", [("/opt/dlami/nvme", "opt-dlami-nvme.mount"),
                                        ("/mnt/k8s-disks/0/", "mnt-k8s\\x2ddisks-0.mount"),
                                        ("/a.b/.c/é", "a.b-.c-\\xc3\\xa9.mount"), ("/.hidden", "\\x2ehidden.mount")])
def test_mount_units_are_named_as_systemd_escape_names_them(path, unit):
    assert storage.mount_unit_name(path) == unit  # systemd-escape --path --suffix=mount PATH


def test_the_tier_path_is_bound_to_a_directory_on_the_array_by_a_mount_unit(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text(EKS_MOUNTS)
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    argv = ["bind-unit", "--unit-dir", "/etc/systemd/system", "--source", "/mnt/k8s-disks/0/nvme", "--target",
            "/opt/dlami/nvme", "--requires", "/mnt/k8s-disks/0", "--root", str(tmp_path)]
    name, changed = storage.bind_unit("/etc/systemd/system", "/mnt/k8s-disks/0/nvme", "/opt/dlami/nvme",
                                      "/mnt/k8s-disks/0", root=str(tmp_path))
    assert (name, changed) == ("opt-dlami-nvme.mount", True)
    unit = (tmp_path / "etc/systemd/system/opt-dlami-nvme.mount").read_text()
    assert "RequiresMountsFor=/mnt/k8s-disks/0\n" in unit and "What=/mnt/k8s-disks/0/nvme\nWhere=/opt/dlami/nvme\n" in unit
    assert "Options=bind\n" in unit and "WantedBy=multi-user.target\n" in unit
    assert (tmp_path / "mnt/k8s-disks/0/nvme").is_dir() and (tmp_path / "opt/dlami/nvme").is_dir()
    assert storage.bind_unit("/etc/systemd/system", "/mnt/k8s-disks/0/nvme", "/opt/dlami/nvme", "/mnt/k8s-disks/0",
                             root=str(tmp_path)) == (name, False)
    assert cli.main(argv) == 0


def test_no_bind_unit_while_the_array_is_not_mounted(tmp_path, capsys):
    """Before nodeadm has assembled the disks, or when it failed: the directory would land on the root volume."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text(EKS_MOUNTS.splitlines(keepends=True)[0])
    with pytest.raises(SetupError, match="/mnt/k8s-disks/0 is not a mount point of its own"):
        storage.bind_unit("/etc/systemd/system", "/mnt/k8s-disks/0/nvme", "/opt/dlami/nvme", "/mnt/k8s-disks/0",
                          root=str(tmp_path))
    assert not (tmp_path / "mnt").exists() and not (tmp_path / "etc").exists()
    assert cli.main(["bind-unit", "--unit-dir", "/etc/systemd/system", "--source", "/elsewhere/nvme", "--target",
                     "/opt/dlami/nvme", "--requires", "/mnt/k8s-disks/0", "--root", str(tmp_path)]) == 1
    assert "not below --requires" in capsys.readouterr().err


MOUNT = {"store": "mountpoint-s3", "path": "/s3", "script": "mount-s3 bucket /s3\n", "failure": "S3 mount failed"}


def test_the_listed_mounts_are_written_as_scripts_root_alone_may_read_and_named_in_order(tmp_path, capsys):
    p = tmp_path / "params.json"
    p.write_text(json.dumps(params(mounts=[MOUNT, dict(MOUNT, store="other/store", path="/data")])))
    assert cli.main(["mounts", "--params", str(p), "--dir", str(tmp_path / "m")]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(r[0], r[1], r[3]) for r in rows] == [("mountpoint-s3", "/s3", "S3 mount failed"),
                                                  ("other/store", "/data", "S3 mount failed")]
    assert rows[0][2] == str(tmp_path / "m/0-mountpoint-s3.sh") and rows[1][2] == str(tmp_path / "m/1-other_store.sh")
    assert (tmp_path / "m/0-mountpoint-s3.sh").read_text() == "mount-s3 bucket /s3\n"
    assert (tmp_path / "m/0-mountpoint-s3.sh").stat().st_mode & 0o777 == 0o700
    assert parameters.validate_params(params())["mounts"] == [], "absent: nothing to mount"


@pytest.mark.parametrize("mounts, words", [
    ({"store": "s3"}, "mounts must be a list"),
    ([dict(MOUNT, extra=1)], "mounts[0]: unknown key(s) extra"),
    ([dict(MOUNT, path="s3")], "mounts[0].path must be an absolute path"),
    ([dict(MOUNT, script=" \n")], "mounts[0].script must be a non-empty shell script"),
    ([dict(MOUNT, failure="two\nlines")], "mounts[0].failure contains a tab, newline or NUL"),
    ([MOUNT, MOUNT], "mounts[1].path /s3 is mounted twice"),
])
def test_a_mounts_list_the_node_cannot_run_is_refused(mounts, words):
    with pytest.raises(SetupError, match=re.escape(words)):
        parameters.validate_eks_params(eks_params(mounts=mounts))

"""The FSx for Lustre mount helper (its node folder's lustre.py) on a --root fixture tree with fake
mount/modprobe/lnetctl/lctl that log their argv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fmcluster.platforms.storage.fsx_lustre.node import lustre

from .conftest import run_main

REPO = Path(__file__).resolve().parents[2]
DNS = "fs-0123.fsx.us-east-1.amazonaws.com"
SOURCE = f"{DNS}@tcp:/abcdefgh"
# Real /proc/mounts lines of a ParallelCluster compute node, as published in aws-parallelcluster-cookbook PRs #3245/#3251.
BASE_MOUNTS = (
    "/dev/nvme0n1p1 / ext4 rw,relatime,discard,errors=remount-ro 0 0\n"
    "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
    "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
    "192.168.0.100:/home /home nfs4 rw,noatime,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,"
    "timeo=600,retrans=2,sec=sys,clientaddr=192.168.10.160,local_lock=none,addr=192.168.0.100 0 0\n"
)
FSX_LINE = ("192.168.10.246@tcp:/6cz4zbev /fsx lustre rw,noatime,checksum,flock,user_xattr,lruresize,lazystatfs,"
            "nouser_fid2path,verbose,encrypt 0 0\n")
ROUTE = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "enp71s0\t00000000\t010A0A0A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
         "enp71s0\t000A0A0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
# p5.48xlarge EFA names from the EFA device plugin's log (aws/eks-charts#1110); p6-b200: 8 rdmap + 2 ibp*s0f0 (mlx5, NVLink).
P5_EFA = [f"rdmap{b}s0" for g in (79, 96, 113, 130, 147, 164, 181, 198) for b in range(g, g + 4)]
P6_EFA = ["rdmap79s0", "rdmap80s0", "rdmap81s0", "rdmap82s0", "rdmap96s0", "rdmap97s0", "rdmap98s0", "rdmap99s0"]
LOGGER = '#!/bin/sh\necho "$(basename "$0") $*" >> "$FAKE_LOG"\n'
# The fake mount records what the kernel would show: the MGS NID, not the DNS name.
MOUNT_OK = 'echo "192.168.10.246@tcp:/${5##*:/} $6 lustre rw,$4,checksum 0 0" >> "$FAKE_ROOT/proc/mounts"\n'


class Node:
    def __init__(self, base: Path) -> None:
        self.base, self.root, self.bin, self.log = base, base / "root", base / "bin", base / "calls.log"
        self.write("/proc/mounts", BASE_MOUNTS)
        self.write("/proc/net/route", ROUTE)
        self.write("/etc/fstab", "LABEL=cloudimg-rootfs / ext4 discard,errors=remount-ro 0 1\n")
        (self.root / "fsx").mkdir()
        for name in ("modprobe", "lctl"):
            self.tool(name, "")
        self.tool("lnetctl", "")
        self.tool("mount", MOUNT_OK)

    def write(self, rel: str, text: str) -> None:
        p = self.root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def tool(self, name: str, body: str) -> None:
        self.bin.mkdir(exist_ok=True)
        p = self.bin / name
        p.write_text(LOGGER + body)
        p.chmod(0o755)

    def ib(self, name: str, driver: str) -> None:
        dev = self.root / "sys/class/infiniband" / name / "device"
        dev.mkdir(parents=True)
        (dev / "driver").symlink_to(f"../../../../bus/pci/drivers/{driver}")

    def efa_node(self, itype: str, devices: list, ibp: tuple = ()) -> None:
        self.write("/sys/devices/virtual/dmi/id/product_name", itype + "\n")
        self.write("/sys/module/efa/version", "2.17.3g\n")
        for d in devices:
            self.ib(d, "efa")
        for d in ibp:
            self.ib(d, "mlx5_core")

    def calls(self, prefix: str = "") -> list:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [ln for ln in lines if ln.startswith(prefix)]

    def run(self, *args: str, fmt: str = "json", timeout: float = 20, cli: bool = False):
        """lustre.main in this process, or (cli) `python -m fmcluster.runtime.lustre` as a node's boot lines start it
        (the runtime's module of that name runs the helper); both with
        the fake tools first on PATH and nothing else in the environment."""
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "FAKE_LOG": str(self.log),
               "FAKE_ROOT": str(self.root), "HOME": str(self.base)}
        argv = list(args)
        if args and args[0] in ("mount", "verify"):
            argv += ["--root", str(self.root)] + ([] if "--format" in args else ["--format", fmt])
        if cli:
            proc = subprocess.run([sys.executable, "-m", "fmcluster.runtime.lustre", *argv], capture_output=True,
                                  text=True, env=env, timeout=timeout, cwd=str(self.base))
            out = Output(proc.returncode, proc.stdout, proc.stderr)
        else:
            out = Output(*run_main(lustre.main, argv, env=env, cwd=self.base, timeout=timeout))
        assert "Traceback" not in out.stderr, out.stderr
        rep = json.loads(out.stdout) if fmt == "json" and out.stdout.startswith("{") else None
        return out.returncode, rep, out


class Output:
    """What a run printed, as subprocess.run gives it."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def mount_args(*extra: str, name: str = "abcdefgh") -> tuple:
    return ("mount", "--dns-name", DNS, "--mount-name", name, "--mount-point", "/fsx", "--backoff", "0.05", *extra)


def step(rep: dict, name: str) -> dict:
    return next(s for s in rep["steps"] if s["step"] == name)


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(tmp_path)


def test_fresh_mount_runs_exact_commands_and_verifies(node):
    rc, rep, proc = node.run(*mount_args(), cli=True)  # as the node's boot script starts it
    assert rc == 0, proc.stdout
    assert node.calls() == ["modprobe lustre", f"mount -t lustre -o noatime,flock {SOURCE} /fsx"]
    assert [s["step"] for s in rep["steps"]] == ["check", "modprobe", "mount", "verify"]
    assert all(s["status"] == "ok" and {"detail", "duration"} <= set(s) for s in rep["steps"])
    assert rep["ok"] is True and rep["mount_point"] == "/fsx"
    assert "after 1 attempt" in step(rep, "mount")["detail"]
    assert os.listdir(node.root / "fsx") == []  # the verify file was deleted


def test_already_mounted_is_not_mounted_again(node):
    node.write("/proc/mounts", BASE_MOUNTS + FSX_LINE)
    rc, rep, proc = node.run(*mount_args(name="6cz4zbev"))
    assert rc == 0, proc.stdout
    assert node.calls() == []
    assert "already mounted" in step(rep, "check")["detail"]
    assert step(rep, "verify")["status"] == "ok"


@pytest.mark.parametrize("line, shown", [
    ("/dev/nvme1n1 /fsx ext4 rw,relatime 0 0\n", "ext4"),
    (FSX_LINE, "6cz4zbev"),  # another FSx file system on the same mount point
])
def test_something_else_mounted_fails_without_mounting(node, line, shown):
    node.write("/proc/mounts", BASE_MOUNTS + line)
    rc, rep, _ = node.run(*mount_args())
    assert rc == 1 and rep["ok"] is False
    assert node.calls() == []
    assert step(rep, "check")["status"] == "fail" and shown in step(rep, "check")["detail"]


def test_missing_lustre_module_names_kernel_drift(node):
    node.tool("modprobe", 'echo "modprobe: FATAL: Module lustre not found in directory /lib/modules/$(uname -r)" >&2\n'
                          "exit 1\n")
    rc, rep, proc = node.run(*mount_args(), fmt="text")
    assert rc == 1
    assert node.calls("mount") == []
    out = proc.stdout
    assert "FAIL modprobe" in out and "Module lustre not found" in out
    assert f"lustre-client-modules-{os.uname().release}" in out and "pin the kernel" in out
    assert out.rstrip().endswith("lustre mount /fsx: FAILED")


def test_mount_retried_with_backoff_until_it_works(node):
    node.tool("mount", 'n=$(($(cat "$FAKE_ROOT/n" 2>/dev/null || echo 0) + 1)); echo $n > "$FAKE_ROOT/n"\n'
                       'if [ $n -le 2 ]; then echo "mount.lustre: mount failed: Input/output error" >&2; exit 5; fi\n'
                       + MOUNT_OK)
    rc, rep, proc = node.run(*mount_args("--retries", "3", "--backoff", "0.2"))
    assert rc == 0, proc.stdout
    assert len(node.calls("mount")) == 3
    assert "after 3 attempt(s)" in step(rep, "mount")["detail"]
    assert step(rep, "mount")["duration"] >= 0.2 + 0.4  # waited, and doubled the wait


def test_mount_gives_up_after_retries(node):
    node.tool("mount", 'echo "mount.lustre: mount failed: Input/output error" >&2; exit 5\n')
    rc, rep, _ = node.run(*mount_args("--retries", "1"))
    assert rc == 1
    assert len(node.calls("mount")) == 2
    detail = step(rep, "mount")["detail"]
    assert "Input/output error" in detail and "2 attempts" in detail and "988" in detail
    assert [s["step"] for s in rep["steps"]] == ["check", "modprobe", "mount"]  # no verify, no fstab


def efa_calls(tcp_if: str, devices: list) -> list:
    return ["lnetctl net show --net efa", "modprobe lnet", f"modprobe kefalnd ipif_name={tcp_if}", "modprobe ksocklnd",
            "lnetctl lnet configure", "lnetctl net del --net tcp", f"lnetctl net add --net tcp --if {tcp_if}",
            *[f"lnetctl net add --net efa --if {d} --peer-credits 32" for d in devices],
            "lnetctl set discovery 1", "lnetctl udsp add --src efa --priority 0",
            "modprobe lustre", f"mount -t lustre -o noatime,flock {SOURCE} /fsx"]


def test_efa_p6_b200_uses_every_efa_device_and_skips_nvlink_ibp(node):
    node.efa_node("p6-b200.48xlarge", P6_EFA, ibp=("ibp115s0f0", "ibp116s0f0"))
    rc, rep, proc = node.run(*mount_args("--efa"))
    assert rc == 0, proc.stdout
    assert node.calls() == efa_calls("enp71s0", P6_EFA)
    assert "8 of 8" in step(rep, "efa-lnet")["detail"]


def test_efa_p5_uses_eight_of_32_one_per_pcie_switch(node):
    node.efa_node("p5.48xlarge", list(reversed(P5_EFA)))
    rc, _, proc = node.run(*mount_args("--efa", "--interface", "ens32"))
    assert rc == 0, proc.stdout
    first_of_group = [f"rdmap{g}s0" for g in (79, 96, 113, 130, 147, 164, 181, 198)]
    assert node.calls() == efa_calls("ens32", first_of_group)


def test_efa_already_configured_is_left_alone(node):
    node.efa_node("p6-b200.48xlarge", P6_EFA)
    shown = "".join(f"        - nid: 1.0.0.{i}@efa\n          status: up\n          interfaces:\n              0: {d}\n"
                    for i, d in enumerate(P6_EFA))
    node.tool("lnetctl", f"cat <<'EOF'\nnet:\n    - net type: efa\n      local NI(s):\n{shown}EOF\n")
    rc, _, proc = node.run(*mount_args("--efa"))
    assert rc == 0, proc.stdout
    assert node.calls() == ["lnetctl net show --net efa", "modprobe lustre",
                            f"mount -t lustre -o noatime,flock {SOURCE} /fsx"]


def test_efa_driver_too_old_fails_before_any_command(node):
    node.efa_node("p5en.48xlarge", P6_EFA)
    node.write("/sys/module/efa/version", "2.10.0\n")
    rc, rep, _ = node.run(*mount_args("--efa"))
    assert rc == 1 and "2.12.1" in step(rep, "efa-lnet")["detail"]
    assert node.calls() == []


def test_fstab_line_added_once(node):
    line = (f"{SOURCE} /fsx lustre defaults,noatime,flock,_netdev,x-systemd.automount,"
            "x-systemd.requires=network-online.target 0 0")
    rc, rep, proc = node.run(*mount_args("--fstab"))
    assert rc == 0, proc.stdout
    assert "added" in step(rep, "fstab")["detail"]
    rc, rep, proc = node.run(*mount_args("--fstab"))  # rerun: mounted now, line already there
    assert rc == 0, proc.stdout
    assert "already has" in step(rep, "fstab")["detail"]
    assert len(node.calls("mount")) == 1
    lines = (node.root / "etc/fstab").read_text().splitlines()
    assert lines == ["LABEL=cloudimg-rootfs / ext4 discard,errors=remount-ro 0 1", line]


def test_efa_file_system_returns_after_reboot_through_a_unit_not_fstab(node):
    """An fstab line would be mounted over TCP before anyone puts LNet on EFA: a boot unit reruns the helper."""
    node.efa_node("p6-b200.48xlarge", P6_EFA)
    node.tool("systemctl", "")
    rc, rep, proc = node.run(*mount_args("--efa", "--fstab"))
    assert rc == 0, proc.stdout
    unit = (node.root / "etc/systemd/system/fmcluster-lustre-fsx.service").read_text()
    assert "After=network-online.target" in unit and "Type=oneshot" in unit
    assert (f"ExecStart=/usr/bin/python3 -m fmcluster.runtime.lustre mount "
            f"--dns-name {DNS} --mount-name abcdefgh "
            "--mount-point /fsx --efa\n") in unit
    assert f"Environment=PYTHONPATH={REPO}" in unit
    assert "systemctl enable fmcluster-lustre-fsx.service" in node.calls("systemctl")
    assert "/fsx" not in (node.root / "etc/fstab").read_text()
    assert "enabled" in step(rep, "boot-unit")["detail"]


def test_fstab_replaces_an_old_fsx_line_but_not_another_file_system(node):
    old = "fs-0999.fsx.us-east-1.amazonaws.com@tcp:/zzzzzzzz /fsx lustre defaults,flock,_netdev 0 0"
    node.write("/etc/fstab", f"# /fsx {old}\n{old}\n")
    rc, rep, proc = node.run(*mount_args("--fstab"))
    assert rc == 0, proc.stdout
    lines = (node.root / "etc/fstab").read_text().splitlines()
    assert lines[0] == f"# /fsx {old}" and len(lines) == 2 and lines[1].startswith(f"{SOURCE} /fsx lustre ")
    node.write("/etc/fstab", "/dev/nvme1n1 /fsx ext4 defaults 0 0\n")
    rc, rep, _ = node.run(*mount_args("--fstab"))
    assert rc == 1 and "something else" in step(rep, "fstab")["detail"]
    assert (node.root / "etc/fstab").read_text() == "/dev/nvme1n1 /fsx ext4 defaults 0 0\n"


def test_verify_passes_on_a_mounted_file_system(node):
    node.write("/proc/mounts", BASE_MOUNTS + FSX_LINE)
    rc, rep, proc = node.run("verify", "--mount-point", "/fsx")
    assert rc == 0, proc.stdout
    assert [s["step"] for s in rep["steps"]] == ["verify"] and node.calls() == []


def test_verify_refuses_a_mount_point_that_is_not_lustre(node):
    rc, rep, _ = node.run("verify", "--mount-point", "/fsx")
    assert rc == 1 and "no lustre file system mounted" in step(rep, "verify")["detail"]


def test_verify_times_out_on_a_hung_write(node):
    node.write("/proc/mounts", BASE_MOUNTS + FSX_LINE)
    os.mkfifo(node.root / "fsx" / f".fmcluster-verify.{os.uname().nodename}")  # open() for write blocks forever
    t0 = time.monotonic()
    rc, rep, _ = node.run("verify", "--mount-point", "/fsx", "--timeout", "1", timeout=15)
    assert time.monotonic() - t0 < 6
    assert rc == 1
    detail = step(rep, "verify")["detail"]
    assert "timed out after 1.0s" in detail and "hung" in detail


@pytest.mark.parametrize("args", [
    (),
    ("mount", "--dns-name", DNS, "--mount-point", "/fsx"),
    ("mount", "--dns-name", DNS, "--mount-name", "abc/def", "--mount-point", "/fsx"),
    ("mount", "--dns-name", "fs 1", "--mount-name", "abcdefgh", "--mount-point", "/fsx"),
    ("mount", "--dns-name", DNS, "--mount-name", "abcdefgh", "--mount-point", "fsx"),
    ("mount", "--dns-name", DNS, "--mount-name", "abcdefgh", "--mount-point", "/fsx", "--retries", "-1"),
    ("verify", "--mount-point", "/fsx", "--timeout", "0"),
    ("verify", "--mount-point", "/fsx", "--timeout", "soon"),
    ("verify", "--mount-point", "/fsx", "--timeout", "nan"),
    ("verify", "--mount-point", "/fsx", "--format", "yaml"),
    ("umount", "--mount-point", "/fsx"),
])
def test_bad_arguments_exit_2(node, args):
    rc, _, proc = node.run(*args, fmt="text")
    assert rc == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "usage:" in proc.stderr
    assert node.calls() == []

"""Mount an FSx for Lustre file system idempotently and prove it answers (stdlib only: the node's python3).

    python3 -m fmcluster.runtime.lustre mount --dns-name D --mount-name M \
        --mount-point /fsx [--efa] [--fstab]
    python3 -m fmcluster.runtime.lustre verify --mount-point /fsx

Boot lines of launch templates run it as ``python3 -m fmcluster.runtime.lustre``, which reaches this module by its
file name (fmcluster/runtime/lustre.py), so the templates stay byte-identical.

--root prefixes every file read or written (tests use fixture trees); commands come from PATH with node paths.
Every command runs under a timeout with a group kill; the write test runs in a child process, because touching a
hung Lustre mount puts the caller in D state. Exit 0 ok, 1 a step failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import fmcluster.runtime
from fmcluster.runtime import mounts
from fmcluster.runtime.node import CmdResult, run_command
from fmcluster.runtime.report import write_atomic
from fmcluster.runtime.rooted import read_text, under

# noatime,flock is what storage.mounts expects (flock: cluster-wide locks; FSx has none by default); AWS's example
# is relatime,flock. For fstab AWS documents `defaults,relatime,flock,_netdev,x-systemd.automount,x-systemd.requires=
# network.service` (LustreGuide/mount-fs-auto-mount-onreboot.html). network.service is missing on AL2023/Ubuntu
# (unverified whether systemd then fails the mount), so we require network-online.target, present wherever systemd is.
MOUNT_OPTIONS = "noatime,flock"
FSTAB_OPTIONS = "defaults,noatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network-online.target"

# Lustre over EFA: https://docs.aws.amazon.com/fsx/latest/LustreGuide/configure-efa-clients.html (OS AL2023, RHEL
# 9.5+, Ubuntu 22.04+ kernel 6.8+; default EFA interfaces: 8 on the types below, 2 on other multi-card instances,
# else 1, each one of the file system's 1024 EFA connections) and the manual steps in
# https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-tuning-efa.html: EFA driver >= 2.12.1; modprobe lnet,
# kefalnd ipif_name=<primary if>, ksocklnd; lnetctl lnet configure; tcp net on that interface; per device
# `lnetctl net add --net efa --if DEV --peer-credits 32` (p5: every 4th device, one per PCIe switch); lnetctl set
# discovery 1; lnetctl udsp add --src efa --priority 0; then modprobe lustre. The mount source stays @tcp.
# Not done here (unverified what exactly it sets): AWS's setup.sh also writes NUMA-aware libcfs CPTs and
# ptlrpcd/ksocklnd tunables; kefalnd >= 1.1.1 on p6 (pcluster-diag); GDS (P5/P5e/P5en/P6-B200/P6e-GB200,
# nvidia-fs >= 2.24.2, setup.sh --optimized-for-gds).
EIGHT_EFA_TYPES = {"p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6e-gb200.36xlarge"}
MIN_EFA_DRIVER = (2, 12, 1)
# What nodes run: the module's name below the runtime, where the archive puts the store's node folder.
# The name nodes run it by (runtime/lustre.py forwards here): launch templates, HyperPod's lifecycle step, the boot
# units it writes and remedies say it, so none breaks when this module moves.
MODULE = "fmcluster.runtime.lustre"
VERIFY_NAME = ".fmcluster-verify."  # + hostname: a leftover from a killed run is overwritten, never piles up

VERIFY_CHILD = (  # argv: path, token; a FIFO or a hung mount blocks in open/write/fsync: the parent kills us
    "import os, sys\np, d = sys.argv[1], sys.argv[2].encode()\n"
    "fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)\nos.write(fd, d)\nos.fsync(fd)\nos.close(fd)\n"
    "got = open(p, 'rb').read()\nos.unlink(p)\nsys.exit(0 if got == d else 'read back %r' % got[:64])\n")


class StepFailed(Exception):
    def __init__(self, step: str, detail: str) -> None:
        super().__init__(detail)
        self.step, self.detail = step, detail


class Job:
    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.root = args.root or "/"
        self.steps: List[Dict[str, Any]] = []
        self.t0 = time.monotonic()

    def path(self, p: str) -> str:
        return under(self.root, p)

    def done(self, step: str, detail: str, status: str = "ok") -> None:
        now = time.monotonic()
        self.steps.append({"step": step, "status": status, "detail": detail, "duration": round(now - self.t0, 3)})
        self.t0 = now

    def run(self, step: str, *argv: str, check: bool = True, hint: str = "") -> CmdResult:
        res = run_command(list(argv), self.a.timeout)
        if check and not res.ok:
            raise StepFailed(step, res.why() + (f" -- {hint}" if hint else ""))
        return res

    def read(self, p: str) -> str:
        try:
            return read_text(self.root, p)
        except OSError:
            return ""


# ---- what is mounted --------------------------------------------------------------------------------------------
def mounted_at(job: Job, mount_point: str) -> Optional[Tuple[str, str]]:
    """(source, fstype) of the top-most mount on mount_point, from /proc/mounts (never a stat of the mount)."""
    found = None
    for m in mounts.parse(job.read("/proc/mounts")):
        if m.mount_point == mount_point:
            found = (m.source, m.fstype)
    return found


def is_ours(entry: Tuple[str, str], mount_name: str) -> bool:
    # The kernel records the MGS NID it resolved (`192.168.10.246@tcp:/6cz4zbev`), not the DNS name, so match the
    # Lustre fsname (the FSx MountName) after ':/'.
    source, fstype = entry
    return fstype == "lustre" and ":/" in source and source.rsplit(":/", 1)[1].strip("/") == mount_name


# ---- EFA / LNet -------------------------------------------------------------------------------------------------
def _natural(name: str) -> List[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def efa_devices(job: Job) -> List[str]:
    """EFA devices: /sys/class/infiniband/<dev>/device/driver -> .../efa. ibp* are NVLink/NVSwitch CX-7 (mlx5)."""
    base = job.path("/sys/class/infiniband")

    def driver(name: str) -> str:
        try:
            return os.path.basename(os.readlink(os.path.join(base, name, "device", "driver")))
        except OSError:
            return ""
    names = sorted(os.listdir(base), key=_natural) if os.path.isdir(base) else []
    return [n for n in names if not n.startswith("ibp") and driver(n) == "efa"]


def pick_efa(devices: List[str], instance_type: str) -> List[str]:
    if instance_type in EIGHT_EFA_TYPES and len(devices) >= 8:
        # Evenly spaced: on p5 this is AWS's every-4th (one per PCIe switch); on p5en (16) it is our choice.
        return [devices[i * len(devices) // 8] for i in range(8)]
    return [devices[0], devices[-1]] if len(devices) > 1 else devices


def primary_interface(job: Job) -> str:
    if job.a.interface:
        return str(job.a.interface)
    for line in job.read("/proc/net/route").splitlines()[1:]:
        f = line.split()
        if len(f) > 2 and f[1] == "00000000":  # default route
            return f[0]
    raise StepFailed("efa-lnet", "no default route in /proc/net/route to name the tcp interface; pass --interface")


def configure_efa(job: Job) -> None:
    step = "efa-lnet"
    raw = job.read("/sys/module/efa/version").strip()
    m = re.match(r"\d+(\.\d+)*", raw)
    if not m:
        raise StepFailed(step, "EFA driver not loaded (/sys/module/efa/version missing): install the EFA software")
    if tuple(int(x) for x in m.group(0).split(".")) < MIN_EFA_DRIVER:
        raise StepFailed(step, f"EFA driver {raw} is older than 2.12.1, the minimum for Lustre over EFA")
    itype = job.read("/sys/devices/virtual/dmi/id/product_name").strip()
    devices = efa_devices(job)
    if not devices:
        raise StepFailed(step, "--efa given but no EFA device under /sys/class/infiniband (driver efa)")
    chosen = pick_efa(devices, itype)
    show = job.run(step, "lnetctl", "net", "show", "--net", "efa", check=False)
    present = set(re.findall(r"^\s*\d+:\s*(\S+)\s*$", show.stdout, re.M)) if show.ok else set()
    if set(chosen) <= present:
        job.done(step, f"LNet already has efa NIs on {', '.join(chosen)}")
        return
    eth = primary_interface(job)
    job.run(step, "modprobe", "lnet", hint="LNet missing: the Lustre client is not installed for this kernel")
    job.run(step, "modprobe", "kefalnd", f"ipif_name={eth}",
            hint="no EFA LND (kefalnd): Lustre over EFA needs a Lustre 2.15 client with kefalnd "
                 "(AL2023, RHEL 9.5+, Ubuntu 22.04+ with kernel 6.8+)")
    job.run(step, "modprobe", "ksocklnd")
    job.run(step, "lnetctl", "lnet", "configure")
    job.run(step, "lnetctl", "net", "del", "--net", "tcp", check=False)  # absent on a fresh node: fine
    job.run(step, "lnetctl", "net", "add", "--net", "tcp", "--if", eth)
    for dev in chosen:
        if dev not in present:
            job.run(step, "lnetctl", "net", "add", "--net", "efa", "--if", dev, "--peer-credits", "32")
    job.run(step, "lnetctl", "set", "discovery", "1")
    job.run(step, "lnetctl", "udsp", "add", "--src", "efa", "--priority", "0")
    job.done(step, f"tcp on {eth}; efa on {len(chosen)} of {len(devices)} EFA devices ({', '.join(chosen)}); "
                   f"instance type {itype or 'unknown'}")


# ---- the steps --------------------------------------------------------------------------------------------------
def load_client(job: Job) -> None:
    release = os.uname().release
    job.run("modprobe", "modprobe", "lustre",
            hint=f"no Lustre client module for the running kernel {release} (Lustre client / kernel drift, e.g. "
                 f"after unattended upgrades): pin the kernel, or install the client built for it "
                 f"(Ubuntu: lustre-client-modules-{release}) and reboot")
    job.done("modprobe", f"lustre loaded (kernel {release})")


def do_mount(job: Job, source: str) -> None:
    a, step = job.a, "mount"
    try:
        os.makedirs(job.path(a.mount_point), exist_ok=True)  # safe: /proc/mounts says nothing is mounted there
    except OSError as exc:
        raise StepFailed(step, f"cannot create {a.mount_point}: {exc.strerror or exc}") from exc
    delay, last = a.backoff, ""
    for attempt in range(1, a.retries + 2):
        res = job.run(step, "mount", "-t", "lustre", "-o", MOUNT_OPTIONS, source, a.mount_point, check=False)
        entry = mounted_at(job, a.mount_point)
        if entry and is_ours(entry, a.mount_name):  # also catches a mount that landed after its command timed out
            job.done(step, f"{source} on {a.mount_point} ({MOUNT_OPTIONS}) after {attempt} attempt(s)")
            return
        last = res.why() if not res.ok else "mount exited 0 but /proc/mounts shows no lustre mount there"
        if attempt <= a.retries:
            time.sleep(delay)  # the file system may have only just become AVAILABLE, or DNS not yet propagated
            delay *= 2
    raise StepFailed(step, f"{last} (after {a.retries + 1} attempts) -- check the file system is AVAILABLE, its DNS "
                           "name resolves, and the security groups allow TCP 988 and 1018-1023 (EFA: all traffic)")


def add_fstab(job: Job, source: str) -> None:
    a, path = job.a, job.path("/etc/fstab")
    line = f"{source} {a.mount_point} lustre {FSTAB_OPTIONS} 0 0"
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        lines = []
    except OSError as exc:
        raise StepFailed("fstab", f"cannot read /etc/fstab: {exc.strerror or exc}") from exc
    same = [i for i in mounts.fstab_lines_on(lines, a.mount_point) if len(lines[i].split()) >= 3]
    if any(lines[i].split() == line.split() for i in same):
        job.done("fstab", f"already has {source} on {a.mount_point}")
        return
    if any(lines[i].split()[2] != "lustre" for i in same):
        raise StepFailed("fstab", f"/etc/fstab mounts something else on {a.mount_point}; not changing it")
    kept = [ln for i, ln in enumerate(lines) if i not in same]  # an old FSx line for this mount point is replaced
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, "\n".join(kept + [line]) + "\n")
    except OSError as exc:
        raise StepFailed("fstab", f"cannot write /etc/fstab: {exc.strerror or exc}") from exc
    job.done("fstab", ("replaced the old entry: " if same else "added: ") + line)


def add_boot_unit(job: Job) -> None:
    """EFA-enabled file systems: LNet over EFA is runtime state, so instead of an fstab line (which systemd would
    mount over plain TCP before anyone configures EFA) a oneshot unit reruns this helper at every boot."""
    a = job.a
    name = "fmcluster-lustre-" + (a.mount_point.strip("/").replace("/", "-") or "root") + ".service"
    runtime = os.path.dirname(os.path.abspath(fmcluster.runtime.__file__))
    pkg = os.path.dirname(os.path.dirname(runtime))  # …/pkg holding fmcluster/
    unit = (
        "[Unit]\n"
        f"Description=fmcluster: LNet over EFA, then mount FSx for Lustre on {a.mount_point}\n"
        "Wants=network-online.target\nAfter=network-online.target\n\n"
        "[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        f"Environment=PYTHONPATH={pkg}\n"
        f"ExecStart=/usr/bin/python3 -m {MODULE} mount --dns-name {a.dns_name} "
        f"--mount-name {a.mount_name} --mount-point {a.mount_point} --efa\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    path = job.path(f"/etc/systemd/system/{name}")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, unit)
    except OSError as exc:
        raise StepFailed("boot-unit", f"cannot write {name}: {exc.strerror or exc}") from exc
    job.run("boot-unit", "systemctl", "enable", name, hint=f"enable {name} by hand")
    job.done("boot-unit", f"{name} enabled: LNet over EFA and the mount return after a reboot")


def verify(job: Job) -> None:
    mp, step = job.a.mount_point, "verify"
    entry = mounted_at(job, mp)
    if not entry or entry[1] != "lustre":
        raise StepFailed(step, f"no lustre file system mounted on {mp} in /proc/mounts"
                               + (f" (found {entry[0]} type {entry[1]})" if entry else ""))
    target = os.path.join(job.path(mp), VERIFY_NAME + os.uname().nodename)
    token = f"fmcluster {os.getpid()} {time.time()}"
    res = run_command([sys.executable or "python3", "-I", "-c", VERIFY_CHILD, target, token], job.a.timeout)
    if res.error:
        raise StepFailed(step, f"write+fsync+read under {mp} did not finish: {res.error} -- the mount is hung or "
                               "unreachable (check lctl get_param '*.*.import' state FULL and lnetctl net show)")
    if res.rc != 0:
        tail = (res.stderr.strip().splitlines() or ["?"])[-1][:200]
        raise StepFailed(step, f"write+fsync+read under {mp} failed: {tail}")
    job.done(step, f"wrote, fsynced, read back and deleted a file under {mp} ({entry[0]})")


def run_mount(job: Job) -> None:
    a = job.a
    source = f"{a.dns_name}@tcp:/{a.mount_name}"
    entry = mounted_at(job, a.mount_point)
    if entry and not is_ours(entry, a.mount_name):
        raise StepFailed("check", f"{a.mount_point} already has {entry[0]} (type {entry[1]}) mounted, "
                                  f"not {source}; refusing to mount over it")
    if entry:
        job.done("check", f"{entry[0]} already mounted on {a.mount_point}; not mounting again")
    else:
        job.done("check", f"nothing mounted on {a.mount_point} yet")
        if a.efa:
            configure_efa(job)  # before lustre loads: loading ptlrpc brings LNet up with its default nets
        load_client(job)
        do_mount(job, source)
    if a.fstab and a.efa:
        add_boot_unit(job)
    elif a.fstab:
        add_fstab(job, source)
    verify(job)


# ---- command line -----------------------------------------------------------------------------------------------
def _number(kind: type, least: float, above: bool = False) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not least <= value < float("inf") or (above and value == least):  # also rejects nan
            raise argparse.ArgumentTypeError(f"must be a finite number {'above' if above else '>='} {least}: {text!r}")
        return value
    return parse


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python3 -m {MODULE}",
                                description="Mount an FSx for Lustre file system idempotently and verify it.")
    sub = p.add_subparsers(dest="action", required=True)
    seconds = _number(float, 0, above=True)
    for name in ("mount", "verify"):
        s = sub.add_parser(name)
        s.add_argument("--mount-point", required=True)
        s.add_argument("--root", default="/", help="prefix for every file read or written (tests)")
        s.add_argument("--timeout", type=seconds, default=60.0, help="seconds per command and for verify")
        s.add_argument("--format", choices=("text", "json"), default="text")
        if name == "mount":
            s.add_argument("--dns-name", required=True)
            s.add_argument("--mount-name", required=True)
            s.add_argument("--efa", action="store_true", help="EFA-enabled file system: put LNet on EFA first")
            s.add_argument("--interface", help="tcp interface for LNet (default: the default-route interface)")
            s.add_argument("--fstab", action="store_true", help="mount again after a reboot: an idempotent /etc/fstab "
                           "line, or with --efa a systemd unit that reruns this helper")
            s.add_argument("--retries", type=_number(int, 0), default=5)
            s.add_argument("--backoff", type=seconds, default=5.0, help="first retry delay, doubled each time")
    a = p.parse_args(argv)
    if not a.mount_point.startswith("/") or re.search(r"\s", a.mount_point):
        p.error(f"--mount-point must be an absolute path without spaces: {a.mount_point!r}")
    a.mount_point = os.path.normpath(a.mount_point)
    if a.action == "mount":
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", a.dns_name):
            p.error(f"--dns-name is not a host name: {a.dns_name!r}")
        if not re.fullmatch(r"[A-Za-z0-9]+", a.mount_name):
            p.error(f"--mount-name must be the FSx MountName (letters and digits): {a.mount_name!r}")
    return a


def main(argv: Optional[List[str]] = None) -> int:
    a = parse_args(argv)
    job = Job(a)
    try:
        if a.action == "mount":
            run_mount(job)
        else:
            verify(job)
    except StepFailed as exc:
        job.done(exc.step, exc.detail, "fail")
    except Exception as exc:  # noqa: BLE001 - a report, never a traceback, whatever the node looks like
        job.done("internal", f"{type(exc).__name__}: {exc}", "fail")
    ok = all(s["status"] != "fail" for s in job.steps)
    if a.format == "json":
        print(json.dumps({"ok": ok, "mount_point": a.mount_point, "steps": job.steps}, indent=2))
    else:
        for s in job.steps:
            print(f"{s['status'].upper():4} {s['step']:<9} {s['detail']} ({s['duration']:.2f}s)")
        print(f"lustre {a.action} {a.mount_point}: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Layer 3: communication — EFA devices and ports, libfabric, aws-ofi-nccl, GPUDirect RDMA, GDRCopy, memlock,
node-wide NCCL/libfabric variables; at the deep level an EFA loopback (fi_pingpong)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from typing import List, Tuple

from .. import versions
from ..node import ProbeError, kill_group
from ..probes.efa import efa_devices
from ..probes.installed import file_versions, libfabric_version, ofi_libraries
from .registry import Ctx, Result, bad, check, has_efa, has_gpus, ok, skip, version_verdict, warn


def _want_efa(ctx: Ctx) -> int:
    return int(ctx.profile.fact("efa_interfaces"))


@check("efa.devices", "communication", applies=has_efa, title="EFA devices (excluding NVLink ibp* devices)")
def devices(ctx: Ctx) -> Result:
    devs, want = efa_devices(ctx), _want_efa(ctx)
    if len(devs) == want:
        return ok(len(devs), want)
    return bad(len(devs), want, "an EFA interface is missing: check the launch template attaches one efa/efa-only "
                                "interface per network card, then stop/start the instance",
               detail=" ".join(devs))


@check("efa.ports", "communication", applies=has_efa, title="EFA ports ACTIVE")
def ports(ctx: Ctx) -> Result:
    devs = efa_devices(ctx)
    if not devs:
        return skip("no EFA device")
    down = []
    for d in devs:
        state = (ctx.node.read_or(f"/sys/class/infiniband/{d}/ports/1/state") or "?").strip()
        if "ACTIVE" not in state:
            down.append(f"{d}={state}")
    if down:
        return bad(", ".join(down), "ACTIVE", "EFA port down: reload the efa module or stop/start the instance")
    return ok(f"{len(devs)} ACTIVE", "ACTIVE")


@check("efa.uverbs", "communication", applies=has_efa, title="RDMA verbs device nodes and kernel modules")
def uverbs(ctx: Ctx) -> Result:
    nodes = [n for n in ctx.node.listdir("/dev/infiniband") if n.startswith("uverbs")]
    missing = [m for m in ("efa", "ib_core", "ib_uverbs") if not ctx.node.exists(f"/sys/module/{m}")]
    want = _want_efa(ctx)
    observed = f"{len(nodes)} uverbs; modules missing: {', '.join(missing) or 'none'}"
    if missing or len(nodes) < want:
        return bad(observed, f">= {want} uverbs; efa ib_core ib_uverbs loaded",
                   "modprobe efa ib_uverbs; reinstall the EFA driver (aws-efa-installer) if missing")
    return ok(observed, f">= {want} uverbs")


@check("efa.installer", "communication", applies=has_efa, title="EFA installer version")
def installer(ctx: Ctx) -> Result:
    got = file_versions(ctx)["efa_installer"]
    want = ctx.profile.min_versions.get("efa_installer")
    if not got:
        return bad("no /opt/amazon/efa_installed_packages", f">= {want}" if want else "installed",
                   "run aws-efa-installer (or use the DLAMI)")
    return version_verdict(ctx, "efa_installer", got, got, "install a newer EFA installer (or a newer DLAMI)")


@check("efa.libfabric", "communication", applies=has_efa, title="libfabric version")
def libfabric(ctx: Ctx) -> Result:
    got = libfabric_version(ctx)
    want = ctx.profile.min_versions.get("libfabric")
    if not got:
        return bad("unknown", f">= {want}" if want else "installed", "install libfabric from the EFA installer")
    return version_verdict(ctx, "libfabric", got, got, "install a newer EFA installer (libfabric)")


@check("efa.domains", "communication", level="standard", applies=has_efa,
       title="libfabric EFA RDM domains (fi_info -p efa -t FI_EP_RDM)")
def domains(ctx: Ctx) -> Result:
    res = ctx.node.run(("fi_info", "-p", "efa", "-t", "FI_EP_RDM"))
    if res.error:
        raise ProbeError(res.why())
    text = res.stdout + res.stderr
    if "fi_getinfo: -61" in text:
        return bad(0, _want_efa(ctx), "libfabric finds no EFA device (-61 No data): check the efa module and "
                                      "that FI_PROVIDER/FI_EFA_* are not mis-set")
    if res.rc != 0:
        raise ProbeError(res.why())
    if "provider:" not in text:
        raise ProbeError(f"fi_info output not understood: {text.strip()[:100]!r}")
    found = sorted(set(re.findall(r"^\s*domain:\s*(\S+)", text, re.M)))
    want = _want_efa(ctx)
    if len(found) != want:
        return bad(len(found), want, "libfabric does not see every EFA device: reinstall EFA, reboot",
                   detail=" ".join(found))
    return ok(len(found), want)


@check("gdr.rdma", "communication", applies=lambda p: has_gpus(p) and has_efa(p),
       title="GPUDirect RDMA: DMA-BUF (kernel >= 5.12 + open driver) or a peer-memory module")
def gpudirect(ctx: Ctx) -> Result:
    peer = [m for m in ("nvidia_peermem", "efa_nv_peermem") if ctx.node.exists(f"/sys/module/{m}")]
    kernel = (ctx.node.read_or("/proc/sys/kernel/osrelease") or "").strip()
    open_module = "Open Kernel Module" in (ctx.node.read_or("/proc/driver/nvidia/version") or "")
    dmabuf = versions.at_least(kernel, "5.12") and open_module
    observed = f"kernel {kernel or '?'}, {'open' if open_module else 'proprietary'} driver, peer modules: " \
               f"{', '.join(peer) or 'none'}"
    if dmabuf or peer:
        return ok(observed, "DMA-BUF or peer memory")
    return bad(observed, "DMA-BUF or peer memory",
               "use the open NVIDIA kernel module on kernel >= 5.12 (DMA-BUF) or modprobe nvidia_peermem")


@check("gdr.gdrcopy", "communication", applies=has_gpus, title="GDRCopy driver loaded, >= minimum")
def gdrcopy(ctx: Ctx) -> Result:
    got = file_versions(ctx)["gdrcopy"]
    if not got:
        if ctx.profile.is_optional("gdrcopy"):
            return skip("gdrdrv not loaded (optional)")
        return bad("gdrdrv not loaded", "loaded", "install gdrcopy and load gdrdrv (systemctl start gdrcopy)")
    if not ctx.node.exists("/dev/gdrdrv"):
        return warn(got, "/dev/gdrdrv present", "gdrdrv loaded but /dev/gdrdrv missing: restart the gdrcopy service")
    return version_verdict(ctx, "gdrcopy", got, got, "install a newer gdrcopy")


@check("efa.memlock", "communication", applies=has_efa, title="memlock unlimited for jobs (limits.d)")
def memlock(ctx: Ctx) -> Result:
    files = ["/etc/security/limits.conf"] + ctx.node.glob("/etc/security/limits.d/*.conf")
    found = {"soft": False, "hard": False}
    for f in files:
        for line in (ctx.node.read_or(f) or "").splitlines():
            parts = line.split("#", 1)[0].split()
            if len(parts) == 4 and parts[0] in ("*", "root") and parts[2] == "memlock" and parts[3] in (
                    "unlimited", "infinity", "-1"):
                if parts[1] in ("soft", "hard", "-"):
                    for k in (("soft", "hard") if parts[1] == "-" else (parts[1],)):
                        found[k] = True
    observed = ", ".join(k for k, v in found.items() if v) or "not set"
    if all(found.values()):
        return ok("soft+hard unlimited", "soft+hard unlimited")
    return bad(observed, "soft+hard unlimited", "add '* soft memlock unlimited' and '* hard memlock unlimited' to "
                                                "/etc/security/limits.d/efa.conf (the EFA installer writes it)")


@check("ofi.plugin", "communication", applies=lambda p: has_gpus(p) and has_efa(p),
       title="aws-ofi-nccl plugin present, >= minimum")
def ofi_plugin(ctx: Ctx) -> Result:
    libs = ofi_libraries(ctx)
    got = file_versions(ctx)["aws_ofi_nccl"]
    want = ctx.profile.min_versions.get("aws_ofi_nccl")
    if not libs:
        return bad("no libnccl-net*.so under /opt/amazon/ofi-nccl", "present",
                   "install aws-ofi-nccl (part of the EFA installer / DLAMI); NCCL falls back to sockets without it")
    if not got:
        return warn(f"{libs[0]} (version unknown)", f">= {want}" if want else "present",
                    "cannot read the plugin version; confirm with NCCL_DEBUG=INFO ('Initializing aws-ofi-nccl')")
    return version_verdict(ctx, "aws_ofi_nccl", got, got,
                           "install a newer aws-ofi-nccl (with the EFA installer) that supports this instance type")


# ---- environment hygiene -------------------------------------------------------------------------------------------
# Variables set node-wide reach every job: /etc/environment (pam_env KEY=VALUE), exported in /etc/profile.d/*.sh, and
# /etc/nccl.conf (NCCL reads it for system-wide values, NCCL docs "Environment Variables"). What is harmful on EFA:
# - aws-ofi-nccl doc/efa-env-var.md: NCCL_PROTO=simple and FI_PROVIDER=efa only for aws-ofi-nccl <= 1.5.0 (simple
#   forgoes the faster LL/LL128 protocols); FI_EFA_USE_DEVICE_RDMA not needed for libfabric >= 1.18 + plugin >= 1.7
#   ("=1" harmless; "=0" turns GPUDirect RDMA off on types that have it, so data is staged through host memory);
#   RDMAV_FORK_SAFE=1 "Do not use ... can break things" on newer kernels, RDMAV_* "Do not use".
# - NCCL env docs: NCCL_NET forces one network by name ("Socket" = TCP; aws-ofi-nccl registers as "AWS Libfabric" or
#   "Libfabric"); NCCL_NET_PLUGIN=none disables the external plugin, leaving NCCL's built-in IB and Socket nets (no
#   EFA); NCCL_SOCKET_IFNAME is a list of interface prefixes ("=name" exact, leading "^" excludes): if nothing matches,
#   NCCL finds no bootstrap interface and init fails; NCCL_P2P_DISABLE=1 turns off NVLink peer-to-peer.
# - FI_PROVIDER other than efa: libfabric offers no EFA provider, aws-ofi-nccl runs over tcp or fails, NCCL over TCP.
# Not flagged: NCCL_IB_DISABLE only gates NCCL's built-in verbs net (ncclIbInit returns early, NVIDIA/nccl
# src/transport/net_ib.cc); the aws-ofi-nccl plugin is a separate net, so it does not force TCP on EFA.
ENV_FILES = ("/etc/environment", "/etc/nccl.conf")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_ENV_PREFIXES = ("NCCL_", "FI_", "RDMAV_")
RDMA_FAMILIES = ("p4", "p5", "p6")  # EFA types with GPUDirect RDMA read/write (AWS EFA docs; later families unverified)


def _env_value(raw: str) -> str:
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        end = raw.find(raw[0], 1)
        return raw[1:end] if end > 0 else raw[1:]
    return re.split(r"\s+#|;", raw, maxsplit=1)[0].strip()


def node_env(ctx: Ctx) -> List[Tuple[str, str, str]]:
    """(name, value, 'file:line') for NCCL_/FI_/RDMAV_ variables set node-wide."""
    found = []
    files = list(ENV_FILES) + ctx.node.glob("/etc/profile.d/*.sh")
    for f in files:
        profile_d = f.startswith("/etc/profile.d/")
        for n, line in enumerate((ctx.node.read_or(f) or "").splitlines(), 1):
            if profile_d and not line.lstrip().startswith("export "):
                continue
            m = _ENV_LINE.match(line)
            if m and m.group(1).startswith(_ENV_PREFIXES):
                found.append((m.group(1), _env_value(m.group(2)), f"{f}:{n}"))
    return found


def _ifname_matches(spec: str, ifaces: List[str]) -> bool:
    """NCCL_SOCKET_IFNAME semantics: comma list of prefixes, '=' for exact names, a leading '^' excludes."""
    if spec.startswith("^"):
        return True  # an exclusion list leaves the other interfaces
    for entry in (e.strip() for e in spec.split(",") if e.strip()):
        exact = entry.startswith("=")
        name = entry[1:] if exact else entry
        if any(i == name if exact else i.startswith(name) for i in ifaces):
            return True
    return False


@check("comm.env_hygiene", "communication", applies=lambda p: has_gpus(p) and has_efa(p),
       title="No node-wide NCCL/libfabric variables that force TCP or slow EFA down")
def env_hygiene(ctx: Ctx) -> Result:
    env = node_env(ctx)
    ifaces = ctx.node.listdir("/sys/class/net")
    rdma = str(ctx.profile.fact("family", "")).startswith(RDMA_FAMILIES)
    fails: List[str] = []
    warns: List[str] = []
    for name, value, where in env:
        v = value.strip().lower()
        item = f"{name}={value} ({where})"
        if name == "NCCL_NET":
            if v == "socket":
                fails.append(f"{item}: forces NCCL's TCP socket transport, EFA unused")
            elif "libfabric" not in v and "ofi" not in v:
                warns.append(f"{item}: forces a network other than aws-ofi-nccl ('AWS Libfabric')")
        elif name == "NCCL_NET_PLUGIN" and v == "none":
            fails.append(f"{item}: disables the aws-ofi-nccl plugin, NCCL falls back to TCP sockets")
        elif name == "FI_PROVIDER" and v:
            provs = [p.strip() for p in v.lstrip("^").split(",")]
            if ("efa" in provs) == v.startswith("^"):
                fails.append(f"{item}: hides libfabric's efa provider, NCCL runs over TCP (or not at all)")
        elif name == "NCCL_SOCKET_IFNAME" and "$" not in value and ifaces and not _ifname_matches(value, ifaces):
            fails.append(f"{item}: matches no interface in /sys/class/net ({', '.join(ifaces)}), NCCL init fails")
        elif name == "NCCL_PROTO":
            warns.append(f"{item}: restricts NCCL protocols (simple was needed only for aws-ofi-nccl <= 1.5.0)")
        elif name == "FI_EFA_USE_DEVICE_RDMA" and v in ("0", "false", "no") and rdma:
            warns.append(f"{item}: turns GPUDirect RDMA off on a type that has it")
        elif name.startswith("RDMAV_"):
            warns.append(f"{item}: rdma-core override the aws-ofi-nccl docs say not to set")
        elif name == "NCCL_P2P_DISABLE" and v not in ("0", "false", "no", ""):
            warns.append(f"{item}: turns NVLink peer-to-peer off inside the node")
    seen = ", ".join(f"{n}={v} ({w})" for n, v, w in env)
    expected = "no variable forcing TCP or restricting NCCL/EFA"
    remedy = ("remove these lines (set per job only when really needed): current aws-ofi-nccl and libfabric pick EFA, "
              "the protocols and GPUDirect RDMA themselves")
    if fails:
        return bad("; ".join(fails + warns), expected, remedy, detail=seen)
    if warns:
        return warn("; ".join(warns), expected, remedy, detail=seen)
    return ok(seen or "none set in /etc/environment, /etc/nccl.conf, /etc/profile.d/*.sh", expected)


# ---- deep ----------------------------------------------------------------------------------------------------------

@check("deep.efa_loopback", "communication", level="deep", applies=has_efa, title="EFA loopback (fi_pingpong)")
def efa_loopback(ctx: Ctx) -> Result:
    argv = ["fi_pingpong", "-p", "efa", "-e", "rdm"]
    exe = shutil.which("fi_pingpong", path=(ctx.node.env or os.environ).get("PATH"))
    if exe is None:
        raise ProbeError("fi_pingpong: not found on PATH")
    server = subprocess.Popen(  # noqa: S603 - list argv, no shell
        [exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env=ctx.node.env,
    )
    try:
        time.sleep(1.0)
        res = ctx.node.run((*argv, "127.0.0.1"), timeout=180, cache=False)
    finally:
        kill_group(server)
        try:
            server.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    out = res.require()
    m = re.search(r"^\s*\d+\S*\s+\d+\s+=?\d+\s+\S+\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)", out, re.M)
    if not m:
        raise ProbeError(f"fi_pingpong output not understood: {out.strip()[:120]!r}")
    return ok(f"{m.group(1)} MB/sec, {m.group(2)} usec/xfer", "loopback completes")

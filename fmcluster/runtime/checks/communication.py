"""Layer 3: communication — EFA devices and ports, libfabric, aws-ofi-nccl, GPUDirect RDMA, GDRCopy, memlock."""

from __future__ import annotations

import re
from typing import List

from .. import versions
from ..probes import ProbeError
from . import Ctx, Result, bad, check, has_efa, has_gpus, ok, skip, warn
from .stack import file_versions, libfabric_version, ofi_libraries


def efa_devices(ctx: Ctx) -> List[str]:
    """/sys/class/infiniband devices bound to the efa driver (NVLink/NVSwitch ibp* mlx5 devices excluded)."""
    devs = []
    for d in ctx.node.listdir("/sys/class/infiniband"):
        if d.startswith("ibp"):
            continue
        if ctx.node.link_name(f"/sys/class/infiniband/{d}/device/driver") == "efa":
            devs.append(d)
    return devs


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
    if want and not versions.at_least(got, want):
        return bad(got, f">= {want}", "upgrade the EFA installer to the known-good bundle")
    pin = ctx.profile.pinned_versions.get("efa_installer")
    if pin and not versions.same(got, pin):
        return bad(got, f"== {pin}", "install the pinned EFA installer")
    return ok(got, f">= {want}" if want else "installed")


@check("efa.libfabric", "communication", applies=has_efa, title="libfabric version")
def libfabric(ctx: Ctx) -> Result:
    got = libfabric_version(ctx)
    want = ctx.profile.min_versions.get("libfabric")
    if not got:
        return bad("unknown", f">= {want}" if want else "installed", "install libfabric from the EFA installer")
    if want and not versions.at_least(got, want):
        return bad(got, f">= {want}", "upgrade the EFA installer (libfabric) to the known-good bundle")
    return ok(got, f">= {want}" if want else "installed")


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
    want = ctx.profile.min_versions.get("gdrcopy")
    if not got:
        if ctx.profile.is_optional("gdrcopy"):
            return skip("gdrdrv not loaded (optional)")
        return bad("gdrdrv not loaded", "loaded", "install gdrcopy and load gdrdrv (systemctl start gdrcopy)")
    if not ctx.node.exists("/dev/gdrdrv"):
        return warn(got, "/dev/gdrdrv present", "gdrdrv loaded but /dev/gdrdrv missing: restart the gdrcopy service")
    if want and not versions.at_least(got, want):
        return bad(got, f">= {want}", "upgrade gdrcopy to the known-good bundle")
    return ok(got, f">= {want}" if want else "loaded")


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
    if want and not versions.at_least(got, want):
        return bad(got, f">= {want}", "upgrade aws-ofi-nccl to the known-good bundle")
    pin = ctx.profile.pinned_versions.get("aws_ofi_nccl")
    if pin and not versions.same(got, pin):
        return bad(got, f"== {pin}", "install the pinned aws-ofi-nccl")
    return ok(got, f">= {want}" if want else "present")

"""Layer 1: hardware and drivers."""

from __future__ import annotations

import re
import time
from typing import Dict

from ..probes.installed import kernel_module_version
from ..probes.kernel_log import ACTION, FAILING_CLASSES, kernel_events
from ..probes.nvidia_smi import FABRIC_ARGV, gpu_rows, nvlink_status, parse_csv, topology_matrix
from ..probes.pci import gpu_bdfs, pcie_links
from ..probes.systemd import unit_states
from .registry import Ctx, Result, bad, check, has_efa, has_gpus, has_nvswitch, ok, skip, version_verdict, warn


def _gpu_model_ok(name: str, want: str) -> bool:
    return bool(want) and re.search(rf"\b{re.escape(want)}\b", name, re.I) is not None


@check("hw.instance_type", "hardware", title="Instance type as reported by the hypervisor (DMI)")
def instance_type(ctx: Ctx) -> Result:
    want = ctx.profile.instance_type
    got = (ctx.node.read("/sys/devices/virtual/dmi/id/product_name") or "").strip()
    if got == want:
        return ok(got, want)
    return bad(got, want, "the node runs with a profile for another instance type: ship the right NodeProfile")


@check("hw.gpu.pci", "hardware", applies=has_gpus, title="GPUs on the PCI bus")
def gpu_pci(ctx: Ctx) -> Result:
    want = int(ctx.profile.fact("gpus"))
    found = gpu_bdfs(ctx)
    if len(found) == want:
        return ok(len(found), want)
    return bad(len(found), want, "a GPU is missing from the PCI bus: stop and start the instance; replace it if it persists",
               detail=", ".join(found))


@check("hw.gpu.driver", "hardware", applies=has_gpus, title="GPUs bound by the NVIDIA driver, model as in the catalog")
def gpu_driver(ctx: Ctx) -> Result:
    want_n, want_model = int(ctx.profile.fact("gpus")), str(ctx.profile.fact("gpu", ""))
    gpus = ctx.node.listdir("/proc/driver/nvidia/gpus")
    if not gpus and not ctx.node.exists("/proc/driver/nvidia"):
        return bad("driver not loaded", f"{want_n} x {want_model}", "load the NVIDIA driver (modprobe nvidia); check dkms")
    models: Dict[str, str] = {}
    for g in gpus:
        info = ctx.node.read_or(f"/proc/driver/nvidia/gpus/{g}/information") or ""
        m = re.search(r"^Model:\s*(.+)$", info, re.M)
        models[g] = m.group(1).strip() if m else "?"
    wrong = {g: n for g, n in models.items() if not _gpu_model_ok(n, want_model)}
    observed = f"{len(gpus)} x {sorted(set(models.values())) or '-'}"
    if len(gpus) != want_n:
        return bad(observed, f"{want_n} x {want_model}",
                   "a GPU is not initialised by the driver (fallen off the bus?): drain and reboot; replace if it repeats")
    if wrong:
        return bad(observed, f"{want_n} x {want_model}", "GPU model differs from the catalog: wrong instance type?")
    return ok(observed, f"{want_n} x {want_model}")


@check("hw.driver.version", "hardware", applies=has_gpus, title="Kernel driver loaded, open module where needed, version")
def driver_version(ctx: Ctx) -> Result:
    p = ctx.profile
    kver = kernel_module_version(ctx)
    if not kver:
        return bad("nvidia module not loaded", "loaded", "install/load the NVIDIA driver")
    proc = ctx.node.read_or("/proc/driver/nvidia/version") or ""
    open_module = "Open Kernel Module" in proc
    problems = []
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", proc)
    if m and m.group(1) != kver:
        problems.append(f"/proc says {m.group(1)}, /sys/module says {kver} (reboot pending?)")
    if str(p.fact("gpu_arch", "")) == "blackwell" and not open_module:
        problems.append("Blackwell needs the open kernel modules")
    # user space (NVML) must be from the same release as the kernel module
    libs = ctx.node.glob("/usr/lib*/libnvidia-ml.so.*.*") + ctx.node.glob("/usr/lib/*-linux-gnu/libnvidia-ml.so.*.*")
    lib_versions = sorted({re.sub(r".*libnvidia-ml\.so\.", "", x) for x in libs})
    if lib_versions and kver not in lib_versions:
        problems.append(f"user-space NVML {', '.join(lib_versions)} != kernel module {kver}")
    observed = f"{kver} ({'open' if open_module else 'proprietary'} module; NVML {', '.join(lib_versions) or '?'})"
    return version_verdict(ctx, "driver", kver, observed, "install a driver that supports this GPU and reboot", problems)


@check("hw.xid", "hardware", applies=has_gpus, title="Xid/SXid errors in the kernel log of this boot")
def xid(ctx: Ctx) -> Result:
    events = kernel_events(ctx)
    if not events:
        return ok("none", "no failing Xid")
    summary = sorted({f"{e['kind']} {e['code']} ({e['class']}: {e['what']}) on {e['pci']}" for e in events})
    failing = [e for e in events if e["class"] in FAILING_CLASSES]
    worst = "rma" if any(e["class"] == "rma" for e in failing) else (
        "reboot" if any(e["class"] == "reboot" for e in failing) else "reset")
    if failing:
        return bad("; ".join(summary), "no failing Xid", ACTION[worst])
    return warn("; ".join(summary), "no failing Xid", "application-level Xids: check the last job; no node action")


@check("hw.pcie_link", "hardware", applies=lambda p: has_gpus(p) or has_efa(p),
       title="PCIe links of GPUs and EFA devices at their maximum width (EFA below maximum speed: warn)")
def pcie_link(ctx: Ctx) -> Result:
    links = pcie_links(ctx)
    if not links:
        return skip("no GPU or EFA device found (see hw.gpu.pci and efa.devices)")
    narrow, slow, unreported, fine = [], [], [], 0
    for ln in links:
        (cur_w, max_w), (cur_s, max_s) = ln.widths, ln.speeds
        if not cur_w or not max_w:
            unreported.append(ln.label())
        elif cur_w < max_w:
            narrow.append(f"{ln.label()} x{cur_w} of x{max_w} at {ln.raw['current_link_speed'] or '?'}")
        elif ln.kind != "GPU" and cur_s and max_s and cur_s < max_s:
            slow.append(f"{ln.label()} {ln.raw['current_link_speed']} of {ln.raw['max_link_speed']} (x{cur_w})")
        else:
            fine += 1
    counted = len(links) - len(unreported)
    if not counted:
        return skip(f"no PCIe link attributes in sysfs for {len(links)} device(s)")
    observed = f"{fine} of {counted} links at full width" + (
        f"; {len(unreported)} without link attributes" if unreported else "")
    expected = "every link at its maximum width; EFA also at its maximum speed"
    detail = f"no link attributes: {', '.join(unreported)}" if unreported else ""
    if narrow:
        return bad("; ".join(narrow + slow), expected,
                   "degraded PCIe link (fewer lanes than the device supports, so less bandwidth): stop and start the "
                   "instance to move to other hardware; report it to AWS if it persists", detail)
    if slow:
        return warn("; ".join(slow), expected,
                    "EFA link trained below its maximum speed. GPUs lower their link speed when idle to save power "
                    "(expected at idle, so GPU speed is not judged), an EFA device should not: watch EFA bandwidth, "
                    "stop/start the instance if it persists", detail)
    return ok(observed, expected, detail)


# ---- standard: one nvidia-smi query shared by the checks below -------------------------------------

@check("hw.smi.gpus", "hardware", level="standard", applies=has_gpus, title="nvidia-smi sees every GPU, right model")
def smi_gpus(ctx: Ctx) -> Result:
    rows, errors = gpu_rows(ctx)
    want_n, want_model = int(ctx.profile.fact("gpus")), str(ctx.profile.fact("gpu", ""))
    names = sorted({r["name"] for r in rows})
    observed = f"{len(rows)} x {names}" + (f"; {len(errors)} error line(s): {errors[0][:100]}" if errors else "")
    if len(rows) != want_n or errors:
        return bad(observed, f"{want_n} x {want_model}", "a GPU is lost to NVML: drain and reboot; replace if it repeats")
    if not all(_gpu_model_ok(r["name"], want_model) for r in rows):
        return bad(observed, f"{want_n} x {want_model}", "GPU model differs from the catalog: wrong instance type?")
    return ok(observed, f"{want_n} x {want_model}")


@check("hw.smi.driver_match", "hardware", level="standard", applies=has_gpus,
       title="nvidia-smi driver version equals the kernel module")
def smi_driver_match(ctx: Ctx) -> Result:
    rows, _ = gpu_rows(ctx)
    got = sorted({r["driver_version"] for r in rows})
    kver = kernel_module_version(ctx)
    if got == [kver]:
        return ok(got[0], kver)
    return bad(", ".join(got), kver, "driver/library version mismatch: reinstall the driver and reboot")


@check("hw.persistence", "hardware", level="standard", applies=has_gpus, title="Persistence mode enabled")
def persistence(ctx: Ctx) -> Result:
    rows, _ = gpu_rows(ctx)
    off = [r["index"] for r in rows if r["persistence_mode"] != "Enabled"]
    if off:
        return bad(f"disabled on GPU {','.join(off)}", "Enabled",
                   "enable nvidia-persistenced (systemctl enable --now nvidia-persistenced)")
    return ok("Enabled", "Enabled")


@check("hw.ecc", "hardware", level="standard", applies=has_gpus, title="ECC on, no uncorrected errors, row remapping clean")
def ecc(ctx: Ctx) -> Result:
    rows, _ = gpu_rows(ctx)
    problems = []
    for r in rows:
        i = r["index"]
        if r["ecc.mode.current"] != "Enabled":
            problems.append(f"GPU{i} ECC {r['ecc.mode.current']}")
        unc = r["ecc.errors.uncorrected.volatile.total"]
        if unc.isdigit() and int(unc) > 0:
            problems.append(f"GPU{i} {unc} uncorrected ECC errors")
        if r["remapped_rows.failure"] == "Yes":
            problems.append(f"GPU{i} row remapping failure")
        if r["remapped_rows.pending"] == "Yes":
            problems.append(f"GPU{i} row remapping pending")
    if any("failure" in p for p in problems):
        return bad("; ".join(problems), "clean", "row remapping failed: drain and replace the node")
    if problems:
        return bad("; ".join(problems), "clean", "drain the node and reset the GPU (nvidia-smi -r) to apply remapping")
    return ok("clean", "clean")


@check("hw.mig", "hardware", level="standard", applies=has_gpus, required=False, title="MIG disabled")
def mig(ctx: Ctx) -> Result:
    rows, _ = gpu_rows(ctx)
    on = [r["index"] for r in rows if r["mig.mode.current"] == "Enabled"]
    if on:
        return warn(f"MIG on GPU {','.join(on)}", "Disabled", "nvidia-smi -mig 0 and reset the GPUs")
    return ok("Disabled", "Disabled")


@check("hw.nvlink", "hardware", level="standard", applies=has_nvswitch, title="NVLink links up, all at the same rate")
def nvlink(ctx: Ctx) -> Result:
    want = int(ctx.profile.fact("nvlink_links_per_gpu"))
    per_gpu = nvlink_status(ctx)
    problems = []
    rates = set()
    for gpu, links in per_gpu.items():
        up = [x for x in links if re.match(r"[\d.]+ GB/s", x)]
        rates.update(up)
        if len(up) != want:
            problems.append(f"GPU{gpu} {len(up)}/{want} links up")
    if len(rates) > 1:
        problems.append(f"mixed link rates {sorted(rates)}")
    n_gpus = int(ctx.profile.fact("gpus"))
    if len(per_gpu) != n_gpus:
        problems.append(f"{len(per_gpu)} GPUs listed, {n_gpus} expected")
    observed = f"{len(per_gpu)} GPUs, rates {sorted(rates)}"
    if problems:
        return bad(observed + "; " + "; ".join(problems), f"{want} links/GPU",
                   "NVLink down: drain, reset the GPUs or reboot; replace if it repeats")
    return ok(observed, f"{want} links/GPU")


@check("hw.topology", "hardware", level="standard", applies=has_nvswitch, title="GPU-to-GPU topology NV<links>")
def topology(ctx: Ctx) -> Result:
    want = f"NV{int(ctx.profile.fact('nvlink_links_per_gpu'))}"
    gpu_cols, rows = topology_matrix(ctx)
    bad_pairs = [f"{gpu}-{col}={val}" for gpu, cells in rows for col, val in cells.items() if val not in ("X", want)]
    n = int(ctx.profile.fact("gpus"))
    if len(rows) != n or len(gpu_cols) != n:
        return bad(f"{len(rows)} GPU rows", f"{n} GPUs all {want}", "a GPU is missing from the topology: drain and reboot")
    if bad_pairs:
        return bad(", ".join(bad_pairs[:6]), f"all pairs {want}", "NVLink degraded: drain and reset/reboot")
    return ok(f"all pairs {want}", f"all pairs {want}")


@check("hw.fabricmanager", "hardware", level="standard", applies=has_nvswitch, title="nvidia-fabricmanager active")
def fabric_manager(ctx: Ctx) -> Result:
    state = unit_states(ctx).get("nvidia-fabricmanager", "unknown")
    if state == "active":
        return ok(state, "active")
    return bad(state, "active", "systemctl restart nvidia-fabricmanager; check journalctl -u nvidia-fabricmanager "
                                "(FM version must equal the driver)")


@check("hw.fabric", "hardware", level="standard", applies=has_nvswitch,
       title="NVLink fabric state Completed/Success (retried while In Progress)")
def fabric_state(ctx: Ctx) -> Result:
    rows, _ = gpu_rows(ctx)
    states = {r["index"]: (r["fabric.state"], r["fabric.status"]) for r in rows}
    wait_until = time.monotonic() + min(ctx.profile.fabric_wait_s, max(0.0, ctx.node.remaining() - 2))
    waited = 0.0
    while any(s == "In Progress" for s, _ in states.values()) and time.monotonic() < wait_until:
        time.sleep(min(2.0, max(0.0, wait_until - time.monotonic())))
        waited = ctx.profile.fabric_wait_s - (wait_until - time.monotonic())
        res = ctx.node.run(FABRIC_ARGV, cache=False)
        if res.ok:
            fresh, _ = parse_csv(res.stdout, ("index", "fabric.state", "fabric.status"))
            states = {r["index"]: (r["fabric.state"], r["fabric.status"]) for r in fresh}
    summary = sorted({f"{s}/{t}" for s, t in states.values()})
    observed = ", ".join(summary) + (f" after waiting {waited:.0f}s" if waited > 0 else "")
    if summary == ["Completed/Success"]:
        return ok(observed, "Completed/Success")
    if any(s == "In Progress" for s, _ in states.values()):
        return bad(observed, "Completed/Success", "fabric still In Progress: is nvidia-fabricmanager running "
                                                  "(and NVLSM on Blackwell)? CUDA fails with error 802 until done")
    return bad(observed, "Completed/Success", "restart nvidia-fabricmanager; reset the GPUs or reboot if it persists")

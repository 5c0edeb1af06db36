"""Layer 6: storage — shared file systems (FSx for Lustre: mounted, answering, client imports, LNet on EFA) and the
instance NVMe."""

from __future__ import annotations

import re
import threading
from typing import Dict, List, Tuple

from ..node import ProbeError
from ..probes.lustre import HEALTHY_IMPORT, LCTL_IMPORTS, LNET_SHOW, parse_imports, parse_lnet_nets
from ..probes.mounts import mounts
from .registry import Ctx, Result, bad, check, has_instance_store, ok, skip


@check("storage.mounts", "storage", applies=lambda p: bool(p.mounts), title="Shared file systems mounted")
def shared_mounts(ctx: Ctx) -> Result:
    table = mounts(ctx)
    problems, seen = [], []
    for m in ctx.profile.mounts:
        path, fstype = m["path"], m.get("fstype", "lustre")
        got = table.get(path)
        if got is None:
            if m.get("required", True):
                problems.append(f"{path} not mounted")
            continue
        if fstype and got[1] != fstype:
            problems.append(f"{path} is {got[1]}, expected {fstype}")
            continue
        if fstype == "lustre" and not ctx.node.exists("/sys/module/lustre"):
            problems.append(f"{path}: lustre module not loaded")
            continue
        seen.append(f"{path} ({got[1]} {got[0]})")
    expected = ", ".join(f"{m['path']} ({m.get('fstype', 'lustre')})" for m in ctx.profile.mounts)
    if problems:
        return bad("; ".join(problems + seen), expected,
                   "mount the file system (check the lustre client for this kernel, the FSx security group, "
                   "and the lifecycle script that mounts it)")
    return ok(", ".join(seen), expected)


@check("storage.lustre_answers", "storage", level="standard",
       applies=lambda p: any(m.get("fstype", "lustre") == "lustre" for m in p.mounts),
       title="Lustre answers (lfs df under a timeout)")
def lustre_answers(ctx: Ctx) -> Result:
    table = mounts(ctx)
    problems, good = [], []
    for m in ctx.profile.mounts:
        path = m["path"]
        if m.get("fstype", "lustre") != "lustre" or table.get(path, ("", ""))[1] != "lustre":
            continue
        res = ctx.node.run(("lfs", "df", path))
        if res.error:
            raise ProbeError(res.why())
        text = res.stdout + res.stderr
        if res.rc != 0 or "filesystem_summary" not in text:
            problems.append(f"{path}: {res.why()}")
        elif "inactive device" in text or "Resource temporarily unavailable" in text:
            problems.append(f"{path}: a target is unreachable")
        else:
            good.append(path)
    if not good and not problems:
        return skip("no lustre file system mounted (see storage.mounts)")
    if problems:
        return bad("; ".join(problems), "all targets answer", "check FSx health and the EFA/TCP path to it; remount")
    return ok(", ".join(good), "all targets answer")


EFA_REMEDY = ("LNet is not on EFA for an EFA-enabled FSx file system: unmount it and run "
              "`python3 -m fmcluster.runtime.lustre mount --efa ...` (loads kefalnd, adds the efa NIs), or check the "
              "Lustre client has kefalnd for this kernel")


def _lustre_mounted(ctx: Ctx) -> List[Dict[str, object]]:
    """Profile mounts of fstype lustre that /proc/mounts shows mounted as lustre."""
    table = mounts(ctx)
    return [m for m in ctx.profile.mounts
            if m.get("fstype", "lustre") == "lustre" and table.get(str(m["path"]), ("", ""))[1] == "lustre"]


def _lnet_efa_problems(ctx: Ctx) -> Tuple[List[str], str]:
    """Problems with LNet over EFA (kefalnd loaded, an efa net with an NI up) and what was seen."""
    if not ctx.node.exists("/sys/module/kefalnd"):
        return ["kefalnd (the EFA LND) is not loaded"], "kefalnd not loaded"
    res = ctx.node.run(LNET_SHOW)
    if res.error:
        raise ProbeError(res.why())
    text = res.stdout + res.stderr
    if res.rc != 0:
        if "Network is down" in text:
            return ["LNet is down (lnetctl net show: Network is down)"], "LNet down"
        raise ProbeError(res.why())
    nets = parse_lnet_nets(res.stdout)
    if not nets:
        raise ProbeError(f"lnetctl net show output not understood: {text.strip()[:100]!r}")
    efa = [ni for t, nis in nets.items() if re.fullmatch(r"efa\d*", t) for ni in nis]
    up = [ni for ni in efa if ni["status"] == "up"]
    seen = f"LNet nets {', '.join(sorted(nets))}; efa NIs up: {len(up)} of {len(efa)}"
    if not efa:
        return ["LNet has no efa net (Lustre traffic goes over TCP)"], seen
    if not up:
        down = ", ".join(f"{ni['nid']} {ni['status']}" for ni in efa)
        return [f"no efa NI is up ({down})"], seen
    return [], seen


@check("storage.lustre_imports", "storage", level="standard",
       applies=lambda p: any(m.get("fstype", "lustre") == "lustre" for m in p.mounts),
       title="Lustre client imports FULL (lctl), LNet on EFA where the mount is EFA-enabled")
def lustre_imports(ctx: Ctx) -> Result:
    mounted = _lustre_mounted(ctx)
    if not mounted:
        return skip("no lustre file system mounted (see storage.mounts)")
    want_efa = [str(m["path"]) for m in mounted if m.get("efa") is True]
    if want_efa and ctx.node.exists("/sys/module/kefalnd"):
        # lnetctl runs beside lctl (Node.run shares the one call): a slow tool costs its own time, not the sum
        threading.Thread(target=ctx.node.run, args=(LNET_SHOW,), daemon=True).start()
    res = ctx.node.run(LCTL_IMPORTS)
    if res.error:
        raise ProbeError(res.why())
    imports = parse_imports(res.stdout)
    if not imports:
        raise ProbeError(res.why() if res.rc != 0 else f"lctl get_param printed no import: "
                                                         f"{(res.stdout + res.stderr).strip()[:100]!r}")
    unhealthy = [f"{target} {state}" for target, state in imports if state not in HEALTHY_IMPORT]
    states = sorted({state for _, state in imports})
    observed = f"{len(imports)} imports ({', '.join(states)})"
    expected = "every import FULL (or IDLE)"
    efa_problems: List[str] = []
    if want_efa:
        efa_problems, seen = _lnet_efa_problems(ctx)
        observed += f"; {seen}"
        expected += f"; LNet efa net up for {', '.join(want_efa)}"
    if unhealthy or efa_problems:
        remedies = []
        if unhealthy:
            remedies.append("a Lustre target is not connected: check the FSx file system's health, its security "
                            "group and the network path; remount if it does not recover")
        if efa_problems:
            remedies.append(EFA_REMEDY)
        return bad("; ".join(unhealthy + efa_problems), expected, "; ".join(remedies),
                   detail=observed if not unhealthy else "")
    return ok(observed, expected)


@check("storage.instance_store", "storage", applies=has_instance_store,
       title="Instance NVMe present and mounted")
def instance_store(ctx: Ctx) -> Result:
    want = int(ctx.profile.fact("nvme_disks"))
    path = str(ctx.profile.instance_store)
    disks = []
    for c in ctx.node.listdir("/sys/class/nvme"):
        model = (ctx.node.read_or(f"/sys/class/nvme/{c}/model") or "").strip()
        if "Instance Storage" in model:
            disks.append(c)
    got = mounts(ctx).get(path)
    observed = f"{len(disks)} instance-store NVMe; {path} " + (f"mounted ({got[1]} {got[0]})" if got else "not mounted")
    expected = f"{want} NVMe, {path} mounted"
    if len(disks) != want:
        return bad(observed, expected, "an instance-store disk is missing: stop/start the instance")
    if got is None:
        return bad(observed, expected, f"assemble the disks (LVM/RAID0) and mount them on {path}")
    return ok(observed, expected)

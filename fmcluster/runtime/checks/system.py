"""Storage (FSx for Lustre, instance NVMe), orchestrator agent and exporters."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from typing import Dict, List, Tuple

from ..probes import ProbeError
from . import Ctx, Result, bad, check, ok, skip
from .hardware import unit_states


def mounts(ctx: Ctx) -> Dict[str, Tuple[str, str, str]]:
    """mount point -> (source, fstype, options) from /proc/mounts (never stat a network mount here)."""
    def probe() -> Dict[str, Tuple[str, str, str]]:
        table: Dict[str, Tuple[str, str, str]] = {}
        for line in ctx.node.read("/proc/mounts").splitlines():
            parts = line.split()
            if len(parts) >= 4:
                table[parts[1].replace("\\040", " ")] = (parts[0], parts[2], parts[3])
        return table
    return ctx.memo("mounts", probe)


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


@check("storage.instance_store", "storage", applies=lambda p: bool(p.instance_store) and int(p.fact("nvme_disks")) > 0,
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


@check("orch.agent", "orchestrator", level="standard", applies=lambda p: p.orchestrator is not None,
       title="Orchestrator agent active (slurmd / kubelet)")
def agent(ctx: Ctx) -> Result:
    unit = "slurmd" if ctx.profile.orchestrator == "slurm" else "kubelet"
    state = unit_states(ctx).get(unit, "unknown")
    if state == "active":
        return ok(f"{unit} {state}", f"{unit} active")
    return bad(f"{unit} {state}", f"{unit} active", f"systemctl restart {unit}; journalctl -u {unit}")


def _fetch(url: str, timeout: float) -> Tuple[int, str]:
    req = urllib.request.Request(url, headers={"User-Agent": "fmcluster-validate"})  # noqa: S310 - http(s) only
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - profile allows http(s) only
        return resp.status, resp.read(8 << 20).decode("utf-8", errors="replace")


@check("exporters.http", "exporters", level="standard", applies=lambda p: bool(p.exporters),
       title="Exporters answer on their metrics endpoint")
def exporters(ctx: Ctx) -> Result:
    results: Dict[str, str] = {}
    timeout = max(0.5, min(ctx.node.tool_timeout, ctx.node.remaining() - 1, 10.0))

    def one(e: Dict[str, object]) -> None:
        name, url, expect = str(e.get("name", e["url"])), str(e["url"]), e.get("expect")
        try:
            status, body = _fetch(url, timeout)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            results[name] = f"no answer: {getattr(exc, 'reason', exc)}"
            return
        if status != 200:
            results[name] = f"HTTP {status}"
        elif expect and str(expect) not in body:
            results[name] = f"answers but has no {expect}"
        else:
            results[name] = "ok"

    threads: List[threading.Thread] = [threading.Thread(target=one, args=(e,), daemon=True) for e in ctx.profile.exporters]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout + 1
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    failing = []
    for e in ctx.profile.exporters:
        name = str(e.get("name", e["url"]))
        r = results.get(name, "no answer: timed out")
        if r != "ok" and e.get("required", True):
            failing.append(f"{name}: {r}")
    observed = ", ".join(f"{k}: {v}" for k, v in sorted(results.items())) or "no answer"
    if failing:
        return bad(observed, "every exporter answers", "start the exporter (systemctl/DaemonSet) and check its port",
                   "; ".join(failing))
    return ok(observed, "every exporter answers")

"""Layer 6: storage — shared file systems (FSx for Lustre: mounted, answering, client imports, LNet on EFA; Mountpoint
for Amazon S3: mounted by its FUSE daemon with the access asked for, answering) and the instance NVMe."""

from __future__ import annotations

import re
import threading
from typing import Any, Dict, List, Tuple

from ..node import ProbeError
from ..probes.filesystem import size_bytes
from ..probes.lustre import HEALTHY_IMPORT, LCTL_IMPORTS, LNET_SHOW, parse_imports, parse_lnet_nets
from ..probes.mounts import mounts
from .registry import Ctx, Result, bad, check, has_instance_store, ok, skip

# Mountpoint for Amazon S3's FUSE session names itself so, with no subtype: /proc/mounts says
# "mountpoint-s3 <path> fuse ro,nosuid,nodev,noatime,..." (mountpoint-s3-fs/src/fuse/config.rs).
MOUNTPOINT_S3 = "mountpoint-s3"
LUSTRE_REMEDY = ("mount the file system (check the lustre client for this kernel, the FSx security group, and the "
                 "lifecycle script that mounts it)")
S3_REMEDY = ("mount the bucket (the boot log says whether mount-s3 installed and mounted; `journalctl -t mount-s3` "
             "says why Mountpoint stopped, often the node role's S3 or KMS permissions); `mount <path>` mounts it "
             "from its fstab line")


def _expected(m: Dict[str, Any]) -> str:
    source = f" from {m['source']}" if m.get("source") else ""
    read_only = m.get("read_only")
    access = "" if not isinstance(read_only, bool) else ", read-only" if read_only else ", read-write"
    return f"{m['path']} ({m.get('fstype', 'lustre')}{source}{access})"


def _mount_problem(ctx: Ctx, m: Dict[str, Any], got: Tuple[str, str, str]) -> str:
    """What is wrong with a mount /proc/mounts shows at the profile's path ("" when nothing)."""
    path, fstype = m["path"], m.get("fstype", "lustre")
    if fstype and got[1] != fstype:
        return f"{path} is {got[1]}, expected {fstype}"
    if m.get("source") and got[0] != m["source"]:
        return f"{path} is {got[1]} from {got[0]}, expected {m['source']}"
    if fstype == "lustre" and not ctx.node.exists("/sys/module/lustre"):
        return f"{path}: lustre module not loaded"
    if isinstance(m.get("read_only"), bool):
        mounted_ro = "ro" in got[2].split(",")
        if mounted_ro != m["read_only"]:
            return f"{path} is mounted {'read-only' if mounted_ro else 'read-write'}, expected " \
                   f"{'read-only' if m['read_only'] else 'read-write'}"
    return ""


@check("storage.mounts", "storage", applies=lambda p: bool(p.mounts), title="Shared file systems mounted")
def shared_mounts(ctx: Ctx) -> Result:
    table = mounts(ctx)
    problems, seen, remedies = [], [], []
    for m in ctx.profile.mounts:
        path = m["path"]
        got = table.get(path)
        problem = (f"{path} not mounted" if m.get("required", True) else "") if got is None else _mount_problem(ctx, m, got)
        if problem:
            problems.append(problem)
            remedy = S3_REMEDY if m.get("source") == MOUNTPOINT_S3 else LUSTRE_REMEDY
            if remedy not in remedies:
                remedies.append(remedy)
        elif got is not None:
            seen.append(f"{path} ({got[1]} {got[0]})")
    expected = ", ".join(_expected(m) for m in ctx.profile.mounts)
    if problems:
        return bad("; ".join(problems + seen), expected, "; ".join(remedies))
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


def _s3_mounts(profile: Any) -> List[Dict[str, Any]]:
    return [m for m in profile.mounts if m.get("source") == MOUNTPOINT_S3]


@check("storage.s3_answers", "storage", level="standard", applies=lambda p: bool(_s3_mounts(p)),
       title="Mountpoint for Amazon S3 answers (statfs through its FUSE daemon, under a timeout)")
def s3_answers(ctx: Ctx) -> Result:
    """statfs goes to the mount-s3 daemon without an S3 request: a daemon that died answers "Transport endpoint is
    not connected", a hung one times out."""
    table = mounts(ctx)
    problems, good = [], []
    for m in _s3_mounts(ctx.profile):
        path = str(m["path"])
        if table.get(path, ("", ""))[0] != MOUNTPOINT_S3:
            continue
        res = ctx.node.run(("stat", "--file-system", "--format=%T", path))
        if res.error:
            raise ProbeError(res.why())
        if res.rc != 0 or "fuse" not in res.stdout:
            problems.append(f"{path}: {res.why() if res.rc != 0 else 'statfs says ' + res.stdout.strip()[:60]}")
        else:
            good.append(path)
    if not good and not problems:
        return skip("no Mountpoint for Amazon S3 mount (see storage.mounts)")
    if problems:
        return bad("; ".join(problems), "every mount answers",
                   "the mount-s3 daemon stopped or hangs: `journalctl -t mount-s3` says why; `umount -l <path>` then "
                   "`mount <path>` remounts it from fstab")
    return ok(", ".join(good), "every mount answers")


# The file system on the instance NVMe is a few percent smaller than its disks (ext4's inode tables and journal, xfs's
# log and allocation-group headers), and a disk missing from an 8-disk RAID0 takes 12.5% away: below this share of the
# catalog's size the tier is not whole. Above the ceiling it is not the instance store at all.
NVME_SIZE_FLOOR = 0.9
NVME_SIZE_CEILING = 1.05


@check("storage.instance_store", "storage", applies=has_instance_store,
       title="Instance NVMe present, mounted and of the catalog's size")
def instance_store(ctx: Ctx) -> Result:
    want = int(ctx.profile.fact("nvme_disks"))
    want_gb = int(ctx.profile.fact("nvme_gb", 0) or 0)
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
    if not want_gb:  # a check that cannot run is no pass
        raise ProbeError("the profile's facts give nvme_disks but no nvme_gb: the size cannot be checked")
    size = size_bytes(ctx, path)
    observed += f", {size / 1e9:,.0f} GB"
    expected += f", {NVME_SIZE_FLOOR:.0%}-{NVME_SIZE_CEILING:.0%} of the catalog's {want_gb:,} GB"
    if not NVME_SIZE_FLOOR * want_gb * 1e9 <= size <= NVME_SIZE_CEILING * want_gb * 1e9:
        return bad(observed, expected, f"{path} is not the whole instance store: `lsblk` shows which disks it spans; "
                   "reassemble it over all of them (its data is scratch) or replace the node")
    return ok(observed, expected)

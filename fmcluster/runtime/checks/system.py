"""Storage (FSx for Lustre, instance NVMe), orchestrator agent and exporters."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Dict, List, Optional, Tuple

from ..contract import AGENT_UNITS, agent_unit
from ..probes import ProbeError
from ..probes.lustre import HEALTHY_IMPORT, LCTL_IMPORTS, LNET_SHOW, parse_imports, parse_lnet_nets
from ..probes.mounts import mount_of, mounts, resolve
from ..probes.systemd import unit_states
from . import Ctx, Result, bad, check, has_instance_store, ok, skip, warn


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


# ---- container data on the instance NVMe (reference/pain-points.md #9) -------------------------------------------
# Docker keeps images, layers and container writable layers under its data-root, default /var/lib/docker (dockerd
# --data-root / daemon.json "data-root"); with the containerd image store (features.containerd-snapshotter, the
# default of fresh Docker Engine >= 29 installs) image layers live under containerd's root instead (default
# /var/lib/containerd, /etc/containerd/config.toml "root"). Enroot (NVIDIA/enroot enroot.in, doc/configuration.md,
# conf/enroot.conf.in): "KEY value" lines in /etc/enroot/enroot.conf (read with IFS " \t=", so "KEY=value" works too);
# ENROOT_CACHE_PATH defaults to ${XDG_CACHE_HOME}/enroot and ENROOT_DATA_PATH to ${XDG_DATA_HOME}/enroot, with
# XDG_CACHE_HOME=${HOME}/.cache and XDG_DATA_HOME=${HOME}/.local/share: the user's home, normally on the root volume.
# enroot.conf.d/*.conf drop-ins exist in newer enroot (conf/enroot.conf.d/README); which of enroot.conf and a drop-in
# wins is not verified here, so every definition found must be off the root volume.
DOCKER_DAEMON_JSON = "/etc/docker/daemon.json"
DOCKERD = ("/usr/bin/dockerd", "/usr/sbin/dockerd", "/usr/local/bin/dockerd")
DOCKER_UNITS = ("/etc/systemd/system/docker.service", "/etc/systemd/system/docker.service.d/*.conf")
CONTAINERD_TOML = "/etc/containerd/config.toml"
ENROOT_CONF = "/etc/enroot/enroot.conf"
ENROOT_KEYS = {"ENROOT_DATA_PATH": "${XDG_DATA_HOME}/enroot", "ENROOT_CACHE_PATH": "${XDG_CACHE_HOME}/enroot"}
_XDG = (("${XDG_DATA_HOME}", "${HOME}/.local/share"), ("${XDG_CACHE_HOME}", "${HOME}/.cache"),
        ("${HOME}", "/home/${USER}"), ("$HOME", "/home/${USER}"))


def static_prefix(value: str) -> Optional[str]:
    """The directory part of a configured path before any shell expansion left in it ($UID, $(...))."""
    for var, default in _XDG:
        value = value.replace(var, default)
    if value.startswith("~"):
        value = "/home/${USER}" + value[1:]
    if "$" in value:
        value = value[:value.index("$")]
        value = value[:value.rindex("/")] if "/" in value else ""
    value = value.rstrip("/") or ("/" if value.startswith("/") else "")
    return value if value.startswith("/") else None


def _docker_items(ctx: Ctx) -> List[Tuple[str, str, str]]:
    """(what, configured path, where it is set) for docker; ProbeError for a garbled daemon.json."""
    node = ctx.node
    cfg: Dict[str, object] = {}
    text = node.read_or(DOCKER_DAEMON_JSON)
    if text is not None:
        try:
            data = json.loads(text) if text.strip() else {}
        except ValueError as exc:
            raise ProbeError(f"{DOCKER_DAEMON_JSON} is not valid JSON ({exc}): dockerd refuses to start") from exc
        if not isinstance(data, dict):
            raise ProbeError(f"{DOCKER_DAEMON_JSON} is not a JSON object: dockerd refuses to start")
        cfg = data
    elif not any(node.exists(p) for p in DOCKERD):
        return []
    root, where = "/var/lib/docker", "default (no data-root in daemon.json)"
    for key in ("data-root", "graph"):  # "graph": the pre-17.05 name, removed in Docker 23
        if key in cfg:
            if not isinstance(cfg[key], str) or not str(cfg[key]).startswith("/"):
                raise ProbeError(f"{DOCKER_DAEMON_JSON}: {key} {cfg[key]!r} is not an absolute path")
            root, where = str(cfg[key]), f"{DOCKER_DAEMON_JSON} {key}"
            break
    units = [g for pattern in DOCKER_UNITS for g in node.glob(pattern)]
    for unit in units:
        for line in (node.read_or(unit) or "").splitlines():
            m = re.match(r"^\s*ExecStart\s*=.*?\s(?:--data-root|-g|--graph)[=\s]+(\S+)", line)
            if m:
                root, where = m.group(1).strip("'\""), f"{unit} ExecStart"
    items = [("docker data-root", root, where)]
    features = cfg.get("features")
    if isinstance(features, dict) and features.get("containerd-snapshotter") is True:
        croot, cwhere = "/var/lib/containerd", "default (containerd image store: images live under containerd's root)"
        for line in (node.read_or(CONTAINERD_TOML) or "").splitlines():
            if line.lstrip().startswith("["):
                break
            m = re.match(r"^\s*root\s*=\s*[\"']([^\"']+)[\"']", line)
            if m:
                croot, cwhere = m.group(1), f"{CONTAINERD_TOML} root"
        items.append(("containerd root", croot, cwhere))
    return items


def _enroot_items(ctx: Ctx) -> List[Tuple[str, str, str]]:
    if not ctx.node.exists(ENROOT_CONF):
        return []
    found: Dict[str, List[Tuple[str, str]]] = {k: [] for k in ENROOT_KEYS}
    for f in [ENROOT_CONF] + ctx.node.glob("/etc/enroot/enroot.conf.d/*.conf"):
        for line in (ctx.node.read_or(f) or "").splitlines():
            m = re.match(r"^\s*(ENROOT_[A-Z_]+)[ \t=]+(.*?)\s*$", line)
            if m and m.group(1) in found and m.group(2):
                found[m.group(1)].append((m.group(2).strip("'\""), f))
    items = []
    for key, default in ENROOT_KEYS.items():
        for value, f in found[key] or [(default, "default (not set in enroot.conf)")]:
            items.append((f"enroot {key}", value, f))
    return items


@check("containers.data_root", "storage", applies=has_instance_store,
       title="Container images on the instance NVMe, not the root volume (docker data-root, enroot paths)",
       remedy=f"fix {DOCKER_DAEMON_JSON} (dockerd does not start with it), then rerun")
def container_data_root(ctx: Ctx) -> Result:
    items = _docker_items(ctx) + _enroot_items(ctx)
    nvme_path = str(ctx.profile.instance_store)
    expected = f"on the instance NVMe ({nvme_path})"
    if not items:
        return skip("neither docker nor enroot is installed (no daemon.json, dockerd or enroot.conf)", expected)
    table = mounts(ctx)
    nvme = table.get(nvme_path)
    root_src = table.get("/", ("", "", ""))[0]
    on_root, elsewhere, seen = [], [], []
    for what, value, where in items:
        prefix = static_prefix(value)
        if prefix is None:
            elsewhere.append(f"{what} {value} ({where}): cannot tell where it lives")
            continue
        real = resolve(ctx, prefix)
        mp, (src, fstype, _) = mount_of(ctx, real)
        shown = value if real == value.rstrip("/") else f"{value} -> {real}"
        line = f"{what} {shown} ({where}) on {mp} ({fstype} {src})"
        if nvme is not None and (mp == nvme_path or (src.startswith("/dev/") and src == nvme[0])):
            seen.append(line)
        elif mp == "/" or (src.startswith("/dev/") and src == root_src):
            on_root.append(line)
        else:
            elsewhere.append(line)
    observed = "; ".join(on_root + elsewhere + seen)
    lifecycle = (f"the lifecycle step 'containers' does it: python3 -m fmcluster.runtime.lifecycle.node docker-config "
                 f"--file {DOCKER_DAEMON_JSON} --data-root {nvme_path}/docker/data-root (then systemctl restart "
                 f"docker) and enroot-config --file {ENROOT_CONF} --base {nvme_path}")
    if on_root:
        note = "" if nvme is not None else f" ({nvme_path} is not mounted: see storage.instance_store)"
        return bad(observed, expected, "container images on the root volume fill it and break the node mid-job; "
                                       f"move them to the instance NVMe{note}: {lifecycle}")
    if elsewhere:
        return warn(observed, expected, f"container data is not on the instance NVMe (slower or smaller disk): "
                                        f"{lifecycle}")
    return ok(observed, expected)


@check("orch.agent", "orchestrator", level="standard", applies=lambda p: p.orchestrator is not None,
       title="Orchestrator agent active (slurmd / kubelet)")
def agent(ctx: Ctx) -> Result:
    unit = agent_unit(ctx.profile.orchestrator) or "none"
    state = unit_states(ctx).get(unit, "unknown")
    if state == "active":
        return ok(f"{unit} {state}", f"{unit} active")
    return bad(f"{unit} {state}", f"{unit} active", f"systemctl restart {unit}; journalctl -u {unit}")


# `scontrol show node NAME` (Slurm's slurm_sprint_node_table): "   State=IDLE+DRAIN ThreadsPerCore=1 ..." (base state
# and flags joined by '+'), and, when set, "   Reason=<text> [<user>@<time>]" as the last field of its line. An
# unknown name prints "Node NAME not found" on stdout and exits 1 (src/scontrol/info_node.c): scontrol matches
# NodeName exactly, so a node registered under another name than its hostname is not found either.
BAD_NODE_STATES = {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING"}
DRAIN_STATES = {"DRAIN", "DRAINED", "DRAINING"}
OUR_REASON = "fmcluster validate"  # actions.reason_for()


def _slurmd_state(ctx: Ctx) -> Optional[str]:
    try:
        return unit_states(ctx).get(AGENT_UNITS["slurm"])
    except ProbeError:
        return None


@check("orch.slurm_node", "orchestrator", level="standard", applies=lambda p: p.orchestrator == "slurm",
       title="Slurm node state not DOWN, DRAIN, FAIL or NOT_RESPONDING (a drain by fmcluster itself excepted)")
def slurm_node(ctx: Ctx) -> Result:
    name = ctx.node_name or socket.gethostname()
    res = ctx.node.run(("scontrol", "show", "node", name))
    expected = "IDLE, ALLOCATED, MIXED or COMPLETING (not DOWN/DRAIN/FAIL/NOT_RESPONDING)"
    if res.error == "not found on PATH":
        return skip("scontrol not installed: the Slurm node state cannot be read", expected)
    if res.error:
        raise ProbeError(res.why())
    if re.search(rf"^Node {re.escape(name)} not found", res.stdout + res.stderr, re.M):
        return skip(f"node {name} is not known to the Slurm controller (yet: it registers when slurmd starts; "
                    "or its NodeName differs from the hostname)", expected)
    m = re.search(r"(?:^|\s)State=(\S+)", res.stdout)
    if res.rc != 0 or m is None:
        raise ProbeError(res.why() if res.rc != 0 else
                         f"scontrol show node output not understood: {res.stdout.strip()[:100]!r}")
    state = m.group(1)
    r = re.search(r"^\s*Reason=(.*?)\s*$", res.stdout, re.M)
    reason = r.group(1) if r else ""
    tokens = {re.sub(r"[^A-Z_]", "", t.upper()) for t in state.split("+")}
    if "*" in state:  # sinfo-style marker for a node that does not respond
        tokens.add("NOT_RESPONDING")
    ours = reason.startswith(OUR_REASON)
    failing = (tokens & BAD_NODE_STATES) - (DRAIN_STATES if ours else set())
    observed = f"{name}: State={state}" + (f" Reason={reason}" if reason else "")
    if failing and failing <= {"DOWN", "NOT_RESPONDING"}:
        slurmd = _slurmd_state(ctx)
        if slurmd is not None and slurmd != "active":
            return skip(f"{observed}; slurmd is {slurmd}: the controller hears from this node only once slurmd "
                        "runs (at boot it starts after the validator; orch.agent checks it)", expected)
    if failing:
        if tokens & DRAIN_STATES and not ours:
            remedy = (f"drained by someone else (see Reason): fix the cause, then scontrol update nodename={name} "
                      "state=resume")
        else:
            remedy = (f"the controller marks the node {'/'.join(sorted(failing))}: check slurmd "
                      f"(journalctl -u slurmd), munge and the network to slurmctld, then scontrol update "
                      f"nodename={name} state=resume")
        return bad(observed, expected, remedy)
    detail = ""
    if tokens & DRAIN_STATES:
        detail = (f"drained by an earlier fmcluster run; this run does not resume it: scontrol update "
                  f"nodename={name} state=resume once the node is healthy")
    return ok(observed, expected, detail)


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

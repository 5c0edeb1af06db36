"""Layer 7: containers — container images and data (docker data-root, containerd root, enroot paths) on the instance
NVMe, not the root volume."""

from __future__ import annotations

import json
import re
from typing import Dict, List, Optional, Tuple

from ..node import ProbeError
from ..probes.mounts import mount_of, mounts, resolve
from .registry import Ctx, Result, bad, check, has_instance_store, ok, skip, warn

# ---- container data on the instance NVMe (images filling a small root volume: awslabs/awsome-distributed-ai #427, #187)
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


@check("containers.data_root", "containers", applies=has_instance_store,
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
    lifecycle = (f"the lifecycle step 'containers' does it: python3 -m fmcluster.runtime.node_setup docker-config "
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

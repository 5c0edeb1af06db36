"""Decisions for the HyperPod lifecycle script (on_init_complete.sh): which node this is, what it must do.

Stdlib only (runs with the node's python3, 3.9+). on_init_complete.sh does every side effect; this module reads
HyperPod's ``resource_config.json`` and our ``fmcluster_parameters.json`` and prints its answers as
``key<TAB>value`` lines, so the decision logic is unit-tested without a node.

Subcommands (exit 0 ok, 1 a clear one-line reason on stderr, 2 usage):

- ``whoami --resource-config F --params F [--root R] [--node-ip IP]...``: this node's role (controller | login |
  compute), instance group, partition, GPU or not, and the settings every later step needs.
- ``users --params F``: validated users, one ``name uid home shell groups`` line each.
- ``user-keys --params F --name N``: that user's SSH public keys, one a line.
- ``storage-root [--root R]``: where container data goes: the instance NVMe (``/opt/dlami/nvme``), else
  HyperPod's secondary EBS volume (``/opt/sagemaker``), else nothing (never the root volume).
- ``docker-config --file F --data-root D``: merge ``data-root`` into docker's daemon.json.
- ``enroot-config --file F --base D``: point enroot's runtime/cache/data/temp paths under D.

HyperPod on EKS (on_create_eks.sh; ``workload_manager: eks`` parameters):

- ``eks-node --params F --group G``: this node's group (named by its entry script), GPU or not, and the settings every
  later step needs, including the policy the boot validator applies on the node.
- ``container-layout --base D``: containerd's, the kubelet's and the pod logs' directories and where under D they go.
- ``fstab-bind --file F --source S --target T --requires D [--after UNIT]``: the bind mount S -> T in fstab, once.
- ``efa-units --unit-dir D``: write the EFA counters' systemd units into D.

How a node finds itself: HyperPod writes every instance's ``CustomerIpAddress`` (its address in the customer
VPC) into resource_config.json; AWS's public base-config lifecycle scripts match the node's primary IPv4
address against that field. We do the same, checking every local IPv4 address (primary first), and fall
back to the instance name == hostname only when no address matches.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

from fmcluster.runtime import mounts
from fmcluster.runtime.contract import (
    EKS_LIFECYCLE_PARAMETERS_KEYS,
    EKS_OBSERVABILITY_KEYS,
    EKS_WORKER_GROUP_KEYS,
    ENROOT_PATH_KEYS,
    HYPERPOD_EBS_ROOT,
    INSTANCE_NVME_ROOT,
    KUBERNETES_DATA_DIRS,
    LIFECYCLE_PARAMETERS_FILE,
    LIFECYCLE_PARAMETERS_KEYS,
    LIFECYCLE_PARAMETERS_VERSION,
    UID_MAX,
    UID_MIN,
    USER_NAME_PATTERN,
    WORKER_GROUP_KEYS,
    ssh_key_ok,
)
from fmcluster.runtime.profile import LEVELS, POLICIES
from fmcluster.runtime.rooted import read_text, under

ROLES = ("controller", "login", "compute")
# validation.policy on HyperPod on EKS nodes: fail (the lifecycle script fails; HyperPod provisions another instance),
# taint (the node reports; the node gate in the cluster keeps a failed node tainted), replace (as taint; the gate
# labels a node with a hardware fault for replacement), report. drain is Slurm's.
EKS_POLICIES = ("taint", "replace", "fail", "report")
DEFAULT_RESOURCE_CONFIG = "/opt/ml/config/resource_config.json"
NVME_ROOT = INSTANCE_NVME_ROOT
EBS_ROOT = HYPERPOD_EBS_ROOT
_NAME = re.compile(USER_NAME_PATTERN)


class LifecycleError(Exception):
    """A problem with the inputs or this node: one line, shown as the step's failure reason."""


# --- inputs -------------------------------------------------------------------------------------------------


def _load_json(path: str, what: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise LifecycleError(f"{what} not found at {path}") from None
    except (OSError, ValueError) as exc:
        raise LifecycleError(f"{what} at {path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LifecycleError(f"{what} at {path} is not a JSON object")
    return data


def _clean(value: Any, field: str) -> str:
    """A string that can travel as one shell argument and one line."""
    if not isinstance(value, str) or not value:
        raise LifecycleError(f"{field} must be a non-empty string, got {value!r}")
    if any(c in value for c in "\t\n\r\0"):
        raise LifecycleError(f"{field} contains a tab, newline or NUL")
    return value


def _known_keys(obj: Dict[str, Any], allowed: Iterable[str], where: str) -> None:
    """Keys the node does not know mean the synth side and the node disagree (contract drift): refuse them."""
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise LifecycleError(f"{where}: unknown key(s) {', '.join(unknown)}; this node knows {', '.join(allowed)}")


def _check_head(params: Dict[str, Any], workload_manager: str, keys: Iterable[str], names: Iterable[str]) -> None:
    """What every parameters file carries: its version, workload manager, known keys and the names it must give."""
    if params.get("version") != LIFECYCLE_PARAMETERS_VERSION:
        raise LifecycleError(f"{LIFECYCLE_PARAMETERS_FILE} version must be {LIFECYCLE_PARAMETERS_VERSION}, "
                             f"got {params.get('version')!r}")
    if params.get("workload_manager") != workload_manager:
        raise LifecycleError(f"workload_manager must be {workload_manager!r}, got {params.get('workload_manager')!r}")
    _known_keys(params, keys, LIFECYCLE_PARAMETERS_FILE)
    for key in names:
        _clean(params.get(key), key)


def _check_workers(params: Dict[str, Any], keys: Iterable[str], names: Iterable[str],
                   flags: Dict[str, bool]) -> List[Dict[str, Any]]:
    """worker_groups: a non-empty list of objects with known keys, the names given, and true/false flags (flag ->
    whether it is required)."""
    workers = params.get("worker_groups")
    if not isinstance(workers, list) or not workers:
        raise LifecycleError("worker_groups must be a non-empty list")
    for i, w in enumerate(workers):
        if not isinstance(w, dict):
            raise LifecycleError(f"worker_groups[{i}] must be an object")
        _known_keys(w, keys, f"worker_groups[{i}]")
        for key in names:
            _clean(w.get(key), f"worker_groups[{i}].{key}")
        for key, required in flags.items():
            if not isinstance(w.get(key) if required else w.get(key, False), bool):
                raise LifecycleError(f"worker_groups[{i}].{key} must be true or false")
    return workers


def validate_params(params: Dict[str, Any]) -> Dict[str, Any]:
    """Check fmcluster_parameters.json and return it with defaults filled in."""
    _check_head(params, "slurm", LIFECYCLE_PARAMETERS_KEYS, ("cluster_name", "region", "controller_group"))
    out = dict(params)
    if params.get("login_group") is not None:
        _clean(params["login_group"], "login_group")
    _check_workers(params, WORKER_GROUP_KEYS, ("instance_group_name", "partition_name", "instance_type"),
                   {"gpu": True, "efa": False})
    _check_fsx(params.get("fsx"))
    out["validation"] = _check_validation(params.get("validation"), default_policy="drain", policies=POLICIES)
    obs = params.get("observability")
    if obs is not None:
        if not isinstance(obs, dict):
            raise LifecycleError("observability must be an object or null")
        url = _clean(obs.get("remote_write_url"), "observability.remote_write_url")
        if not url.startswith("https://"):
            raise LifecycleError("observability.remote_write_url must be an https:// URL")
        interval = obs.get("scrape_interval_seconds", 30)
        if not isinstance(interval, int) or isinstance(interval, bool) or not 1 <= interval <= 3600:
            raise LifecycleError("observability.scrape_interval_seconds must be an integer from 1 to 3600")
        if not isinstance(obs.get("gpu_job_map", False), bool):
            raise LifecycleError("observability.gpu_job_map must be true or false")
    users_of(out)
    return out


def users_of(params: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The ``users`` list, validated. Each: ``{"name", "uid", "home"?, "shell"?, "groups"?, "ssh_public_keys"?}``.

    A fixed uid is required: home directories and files on the shared FSx must belong to the same id on
    every node."""
    users = params.get("users") or []
    if not isinstance(users, list):
        raise LifecycleError("users must be a list")
    out: List[Dict[str, Any]] = []
    seen_names, seen_uids = set(), set()
    for i, u in enumerate(users):
        if not isinstance(u, dict):
            raise LifecycleError(f"users[{i}] must be an object")
        name = u.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise LifecycleError(f"users[{i}].name must match {_NAME.pattern}, got {name!r}")
        uid = u.get("uid")
        if not isinstance(uid, int) or isinstance(uid, bool) or not UID_MIN <= uid <= UID_MAX:
            raise LifecycleError(f"users[{i}].uid must be an integer from {UID_MIN} to {UID_MAX} (same on every node), "
                                 f"got {uid!r}")
        if name in seen_names or uid in seen_uids:
            raise LifecycleError(f"users[{i}]: name {name} or uid {uid} is used twice")
        seen_names.add(name)
        seen_uids.add(uid)
        home = _clean(u.get("home", f"/home/{name}"), f"users[{i}].home")
        shell = _clean(u.get("shell", "/bin/bash"), f"users[{i}].shell")
        if not home.startswith("/") or " " in home or not shell.startswith("/") or " " in shell:
            raise LifecycleError(f"users[{i}].home and .shell must be absolute paths without spaces")
        groups = u.get("groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) and _NAME.match(g) for g in groups):
            raise LifecycleError(f"users[{i}].groups must be a list of group names")
        keys = u.get("ssh_public_keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) and ssh_key_ok(k) for k in keys):
            raise LifecycleError(f"users[{i}].ssh_public_keys must be a list of one-line OpenSSH public keys")
        out.append({"name": name, "uid": uid, "home": home, "shell": shell, "groups": groups, "ssh_public_keys": keys})
    return out


def _check_validation(validation: Any, *, default_policy: str, policies: Iterable[str], where: str = "") -> Dict[str, str]:
    """The parameters' validation section: level and policy, each one of those allowed."""
    validation = validation or {}
    level, policy = validation.get("level", "standard"), validation.get("policy", default_policy)
    if level not in LEVELS:
        raise LifecycleError(f"validation.level must be one of {', '.join(LEVELS)}, got {level!r}")
    if policy not in policies:
        raise LifecycleError(f"validation.policy must be one of {', '.join(policies)}{where}, got {policy!r}")
    return {"level": level, "policy": policy}


def _check_fsx(fsx: Any) -> None:
    if fsx is None:
        return
    if not isinstance(fsx, dict):
        raise LifecycleError("fsx must be an object or null")
    for key in ("dns_name", "mount_name", "mount_point"):
        _clean(fsx.get(key), f"fsx.{key}")
    if not fsx["mount_point"].startswith("/") or fsx["mount_point"] == "/":
        raise LifecycleError(f"fsx.mount_point must be an absolute path below /, got {fsx['mount_point']!r}")
    if not isinstance(fsx.get("efa", False), bool):
        raise LifecycleError("fsx.efa must be true or false")


def validate_eks_params(params: Dict[str, Any]) -> Dict[str, Any]:
    """Check the HyperPod on EKS parameters (``workload_manager: eks``) and return them with defaults filled in."""
    _check_head(params, "eks", EKS_LIFECYCLE_PARAMETERS_KEYS, ("cluster_name", "region", "system_group"))
    out = dict(params)
    workers = _check_workers(params, EKS_WORKER_GROUP_KEYS, ("instance_group_name", "instance_type"),
                             {"gpu": True, "efa": True, "instance_store": False})
    if params["system_group"] in {w["instance_group_name"] for w in workers}:
        raise LifecycleError(f"system_group {params['system_group']!r} is also a worker group")
    _check_fsx(params.get("fsx"))
    out["validation"] = _check_validation(params.get("validation"), default_policy="taint", policies=EKS_POLICIES,
                                          where=" on EKS nodes")
    obs = params.get("observability")
    if obs is not None:
        if not isinstance(obs, dict) or set(obs) - set(EKS_OBSERVABILITY_KEYS):
            raise LifecycleError(f"observability must be null or an object of {', '.join(EKS_OBSERVABILITY_KEYS)}")
        if not isinstance(obs.get("efa_textfile", False), bool):
            raise LifecycleError("observability.efa_textfile must be true or false")
    return out


def eks_node(params: Dict[str, Any], group: str) -> Dict[str, str]:
    """Everything on_create_eks.sh needs for a node of instance group `group` (its entry script names the group)."""
    params = validate_eks_params(params)
    _clean(group, "--group")
    workers = {w["instance_group_name"]: w for w in params["worker_groups"]}
    if group == params["system_group"]:
        role, gpu, efa, instance_type, instance_store = "system", False, False, "", False
    elif group in workers:
        role, gpu, efa = "worker", workers[group]["gpu"], workers[group]["efa"]
        instance_type = workers[group]["instance_type"]
        instance_store = workers[group].get("instance_store", False)
    else:
        raise LifecycleError(f"instance group {group!r} is neither the system_group nor one of the worker_groups in "
                             f"{LIFECYCLE_PARAMETERS_FILE}")
    fsx = params.get("fsx") or {}
    obs = params.get("observability") or {}
    policy = params["validation"]["policy"]
    return {
        "role": role,
        "group": group,
        "gpu": "1" if gpu else "0",
        "efa": "1" if efa else "0",
        "instance_type": instance_type,
        # a GPU type with instance-store NVMe: wait for /opt/dlami/nvme itself, and never fall back silently
        "nvme_expected": "1" if gpu and instance_store else "0",
        "cluster": params["cluster_name"],
        "region": params["region"],
        "fsx": "1" if fsx else "0",
        "fsx_dns_name": fsx.get("dns_name", ""),
        "fsx_mount_name": fsx.get("mount_name", ""),
        "fsx_mount_point": fsx.get("mount_point", ""),
        # LNet over EFA only where this node has EFA; others reach an EFA-enabled file system over TCP
        "fsx_efa": "1" if fsx.get("efa") and efa else "0",
        "level": params["validation"]["level"],
        "policy": policy,
        # on the node: fail stops provisioning; taint and report only report, and the node gate acts on taint
        "node_policy": "fail" if policy == "fail" else "report",
        "efa_textfile": "1" if obs.get("efa_textfile") and efa else "0",
    }


def container_layout(base: str) -> List[Tuple[str, str, str]]:
    """(name, the directory containerd/kubelet use, where its data goes under `base`)."""
    if not base.startswith("/") or base == "/":
        raise LifecycleError(f"--base must be an absolute directory below /, got {base!r}")
    return [(name, path, f"{base.rstrip('/')}/{name}") for name, path in KUBERNETES_DATA_DIRS]


def fstab_bind(path: str, source: str, target: str, requires: str, after: Optional[str] = None) -> bool:
    """Add ``source target none bind,x-systemd.requires-mounts-for=requires[,x-systemd.after=UNIT] 0 0`` unless
    `target` is in fstab already (then it must be this bind mount). `after`: the unit that mounts `requires` when no
    fstab line does (the DLAMI's dlami-nvme.service), so the bind mount waits for it at boot. True when the file
    changed."""
    options = f"bind,x-systemd.requires-mounts-for={requires}" + (f",x-systemd.after={after}" if after else "")
    line = f"{source} {target} none {options} 0 0"
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        lines = []
    for ln in lines:
        fields = ln.split()
        if ln.lstrip().startswith("#") or len(fields) < 2 or fields[1] != target:
            continue
        if fields[:2] == [source, target] and len(fields) > 3 and "bind" in fields[3].split(","):
            return False
        raise LifecycleError(f"/etc/fstab already mounts {fields[0]} on {target}; not adding the bind mount of {source}")
    _write(path, "\n".join(lines + [line]) + "\n")
    return True


def write_efa_units(unit_dir: str) -> List[str]:
    """Write the EFA counters' systemd units (the runtime's text) into `unit_dir`; their names."""
    from fmcluster.runtime.observability import EFA_TEXTFILE_UNITS  # only EKS nodes need it

    for name, text in EFA_TEXTFILE_UNITS.items():
        _write(os.path.join(unit_dir, name), text)
    return list(EFA_TEXTFILE_UNITS)


# --- who am I -----------------------------------------------------------------------------------------------


def local_addresses(root: str = "/") -> List[str]:
    """This node's IPv4 addresses, primary (default-route source) first, loopback excluded."""
    addrs: List[str] = []
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect(("10.254.254.254", 1))  # no packet is sent: this only selects the source address
        addrs.append(sock.getsockname()[0])
    except OSError:
        pass
    finally:
        sock.close()
    try:
        with open(under(root, "/proc/net/fib_trie"), encoding="utf-8") as fh:
            last = ""
            for line in fh:
                m = re.search(r"\|--\s+(\d+\.\d+\.\d+\.\d+)", line)
                if m:
                    last = m.group(1)
                elif "host LOCAL" in line and last and last not in addrs:
                    addrs.append(last)
    except OSError:
        pass
    return [a for a in addrs if not a.startswith("127.")]


def find_instance(resource_config: Dict[str, Any], addresses: Iterable[str],
                  hostname: str = "") -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(instance group, instance) whose CustomerIpAddress is one of ``addresses``; else whose InstanceName
    or ``ip-a-b-c-d`` hostname names this node."""
    groups = resource_config.get("InstanceGroups")
    if not isinstance(groups, list):
        raise LifecycleError("resource_config.json has no InstanceGroups list")
    addresses = list(addresses)
    for addr in addresses:
        hits = [(g, i) for g in groups for i in (g.get("Instances") or []) if i.get("CustomerIpAddress") == addr]
        if len(hits) > 1:
            raise LifecycleError(f"address {addr} appears {len(hits)} times in resource_config.json")
        if hits:
            return hits[0]
    if hostname:
        short = hostname.split(".")[0]
        m = re.match(r"^ip-(\d+)-(\d+)-(\d+)-(\d+)$", short)
        wanted = ".".join(m.groups()) if m else None
        for g in groups:
            for i in g.get("Instances") or []:
                if i.get("InstanceName") == short or (wanted and i.get("CustomerIpAddress") == wanted):
                    return g, i
    raise LifecycleError(f"this node ({', '.join(addresses) or 'no IPv4 address'}; hostname {hostname or '?'}) "
                         "is not in resource_config.json (no CustomerIpAddress or InstanceName matches)")


def whoami(resource_config: Optional[Dict[str, Any]], params: Dict[str, Any], addresses: Iterable[str],
           hostname: str = "", group_name: Optional[str] = None) -> Dict[str, str]:
    """Everything on_init_complete.sh needs, as strings.

    ``group_name`` is the instance group the node's entry script names (one per group). With it the node needs no
    ``resource_config.json`` (AWS does not document that file in OnInitComplete mode and its samples treat its
    absence as normal); when the file is there it only adds the node's address and the controllers', and must agree.
    Without a group name the node finds itself in the file."""
    params = validate_params(params)
    addresses = list(addresses)
    group: Dict[str, Any] = {}
    instance: Dict[str, Any] = {}
    if resource_config is not None:
        try:
            group, instance = find_instance(resource_config, addresses, hostname)
        except LifecycleError:
            if group_name is None:
                raise
    elif group_name is None:
        raise LifecycleError("no resource_config.json and no instance group named by the entry script: cannot tell "
                             "which group this node is in")
    if group_name is not None:
        listed = group.get("Name")
        if listed is not None and listed != group_name:
            raise LifecycleError(f"resource_config.json puts this node in instance group {listed!r}, its lifecycle "
                                 f"entry script in {group_name!r}")
        group = dict(group, Name=group_name)
    name = _clean(group.get("Name"), "InstanceGroups[].Name")
    workers = {w["instance_group_name"]: w for w in params["worker_groups"]}
    partition, gpu, efa = "", False, False
    instance_type = str(group.get("InstanceType") or "")
    if name == params["controller_group"]:
        role = "controller"
    elif params.get("login_group") and name == params["login_group"]:
        role = "login"
    elif name in workers:
        role, partition, gpu = "compute", workers[name]["partition_name"], workers[name]["gpu"]
        instance_type = workers[name]["instance_type"]
        efa = workers[name].get("efa") is True
    else:
        raise LifecycleError(f"instance group {name!r} is neither the controller_group, the login_group nor one of "
                             "the worker_groups in fmcluster_parameters.json")
    controllers = [i.get("CustomerIpAddress", "") for g in (resource_config or {}).get("InstanceGroups") or []
                   if g.get("Name") == params["controller_group"] for i in (g.get("Instances") or [])]
    fsx = params.get("fsx") or {}
    obs = params.get("observability") or {}
    return {
        "role": role,
        "group": name,
        "partition": partition,
        "gpu": "1" if gpu else "0",
        "instance_type": instance_type,
        "instance_name": str(instance.get("InstanceName") or ""),
        "node_ip": str(instance.get("CustomerIpAddress") or (addresses[0] if addresses else "")),
        "controller_ips": ",".join(c for c in controllers if c),
        "cluster": params["cluster_name"],
        "region": params["region"],
        "fsx": "1" if fsx else "0",
        "fsx_dns_name": fsx.get("dns_name", ""),
        "fsx_mount_name": fsx.get("mount_name", ""),
        "fsx_mount_point": fsx.get("mount_point", ""),
        # LNet over EFA only where this node has EFA; others reach an EFA-enabled file system over TCP
        "fsx_efa": "1" if fsx.get("efa") and efa else "0",
        "level": params["validation"]["level"],
        "policy": params["validation"]["policy"],
        "observability": "1" if obs else "0",
        "remote_write_url": obs.get("remote_write_url", ""),
        "scrape_interval": str(obs.get("scrape_interval_seconds", 30)) if obs else "",
        "gpu_job_map": "1" if obs.get("gpu_job_map") else "0",
        "users": str(len(users_of(params))),
    }


# --- storage ------------------------------------------------------------------------------------------------


def mount_points(root: str = "/") -> Dict[str, str]:
    """mount point -> device, from /proc/mounts under ``root``."""
    try:
        return {m.mount_point: m.source for m in mounts.parse(read_text(root, "/proc/mounts"))}
    except OSError:
        return {}


def storage_root(root: str = "/") -> Tuple[Optional[str], str]:
    """(directory for container data, why). The instance NVMe, else the secondary EBS volume, else None:
    both must be their own mount points, so a missing disk never silently lands on the root volume."""
    mounts = mount_points(root)
    for path, why in ((NVME_ROOT, "instance-store NVMe"), (EBS_ROOT, "HyperPod secondary EBS volume (no instance NVMe)")):
        if path in mounts and mounts.get("/") != mounts[path]:
            return path, why
    return None, f"neither {NVME_ROOT} nor {EBS_ROOT} is a mount point"


def docker_config(path: str, data_root: str) -> bool:
    """Set ``data-root`` in docker's daemon.json, keeping every other key. True when the file changed.

    Docker Engine 29+ fresh installs keep images in containerd's image store (/var/lib/containerd, on the root
    volume) whatever data-root says; unless the file chooses explicitly, the classic store is kept so images
    follow data-root onto the NVMe (Docker docs, "containerd image store")."""
    current: Dict[str, Any] = {}
    if os.path.exists(path):
        current = _load_json(path, "docker daemon.json")
    wanted = dict(current, **{"data-root": data_root})
    features = dict(current.get("features") or {})
    features.setdefault("containerd-snapshotter", False)
    wanted["features"] = features
    if wanted == current:
        return False
    _write(path, json.dumps(wanted, indent=2, sort_keys=True) + "\n")
    return True


ENROOT_KEYS = ENROOT_PATH_KEYS


def enroot_settings(base: str) -> Dict[str, str]:
    # ${UID} is expanded by enroot per user (enroot.conf documents it), so users do not share runtime dirs
    return {
        "ENROOT_RUNTIME_PATH": f"{base}/enroot/runtime/user-${{UID}}",
        "ENROOT_CACHE_PATH": f"{base}/enroot/cache",
        "ENROOT_DATA_PATH": f"{base}/enroot/data/user-${{UID}}",
        "ENROOT_TEMP_PATH": f"{base}/enroot/tmp",
    }


def enroot_config(path: str, base: str) -> bool:
    """Point enroot's runtime, cache, data and temp paths under ``base`` (commented or missing keys are
    set; other lines kept). True when the file changed."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        lines = []
    want = enroot_settings(base)
    out, done = [], set()
    for line in lines:
        m = re.match(r"^\s*#?\s*(ENROOT_[A-Z_]+)\s", line + " ")
        if m and m.group(1) in want:
            if m.group(1) not in done:
                out.append(f"{m.group(1)} {want[m.group(1)]}")
                done.add(m.group(1))
            continue
        out.append(line)
    out += [f"{k} {v}" for k, v in want.items() if k not in done]
    if out == lines:
        return False
    _write(path, "\n".join(out) + "\n")
    return True


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.fmcluster.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


# --- CLI ----------------------------------------------------------------------------------------------------


def _emit(values: Dict[str, str]) -> None:
    for key, value in values.items():
        print(f"{key}\t{value}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m fmcluster.runtime.lifecycle.node")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("whoami")
    p.add_argument("--resource-config", help="HyperPod's resource_config.json, when the node has one")
    p.add_argument("--group", help="the instance group the entry script names")
    p.add_argument("--params", required=True)
    p.add_argument("--root", default="/")
    p.add_argument("--node-ip", action="append", default=[], help="this node's address (default: discovered)")
    p.add_argument("--hostname", default="")
    u = sub.add_parser("users")
    u.add_argument("--params", required=True)
    k = sub.add_parser("user-keys")
    k.add_argument("--params", required=True)
    k.add_argument("--name", required=True)
    s = sub.add_parser("storage-root")
    s.add_argument("--root", default="/")
    d = sub.add_parser("docker-config")
    d.add_argument("--file", required=True)
    d.add_argument("--data-root", required=True)
    e = sub.add_parser("enroot-config")
    e.add_argument("--file", required=True)
    e.add_argument("--base", required=True)
    n = sub.add_parser("eks-node")
    n.add_argument("--params", required=True)
    n.add_argument("--group", required=True)
    c = sub.add_parser("container-layout")
    c.add_argument("--base", required=True)
    b = sub.add_parser("fstab-bind")
    b.add_argument("--file", required=True)
    b.add_argument("--source", required=True)
    b.add_argument("--target", required=True)
    b.add_argument("--requires", required=True)
    b.add_argument("--after", help="the systemd unit that mounts --requires, if no fstab line does")
    f = sub.add_parser("efa-units")
    f.add_argument("--unit-dir", required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "whoami":
            addresses = args.node_ip or local_addresses(args.root)
            config = _load_json(args.resource_config, "resource_config.json") if args.resource_config else None
            _emit(whoami(config, _load_json(args.params, "fmcluster_parameters.json"),
                         addresses, args.hostname or socket.gethostname(), args.group))
        elif args.cmd in ("users", "user-keys"):
            users = users_of(validate_params(_load_json(args.params, "fmcluster_parameters.json")))
            if args.cmd == "users":
                for x in users:
                    print("\t".join([x["name"], str(x["uid"]), x["home"], x["shell"], ",".join(x["groups"])]))
            else:
                for x in users:
                    if x["name"] == args.name:
                        print("\n".join(x["ssh_public_keys"]))
        elif args.cmd == "storage-root":
            path, why = storage_root(args.root)
            print(f"{path or ''}\t{why}")
        elif args.cmd == "docker-config":
            print("changed" if docker_config(args.file, args.data_root) else "unchanged")
        elif args.cmd == "enroot-config":
            print("changed" if enroot_config(args.file, args.base) else "unchanged")
        elif args.cmd == "eks-node":
            _emit(eks_node(_load_json(args.params, "fmcluster_parameters.json"), args.group))
        elif args.cmd == "container-layout":
            for row in container_layout(args.base):
                print("\t".join(row))
        elif args.cmd == "fstab-bind":
            print("changed" if fstab_bind(args.file, args.source, args.target, args.requires, args.after)
                  else "unchanged")
        elif args.cmd == "efa-units":
            print("\n".join(write_efa_units(args.unit_dir)))
    except LifecycleError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""fmcluster_parameters.json, the HyperPod lifecycle's parameters (runtime/contract.py names the layout): each
workload manager's document checked against the keys this node knows, with its defaults filled in.

A key the node does not know means the synth side and the node disagree (contract drift): it is refused, not
ignored."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Tuple

from fmcluster.runtime.contract import (
    EKS_LIFECYCLE_PARAMETERS_KEYS,
    EKS_OBSERVABILITY_KEYS,
    EKS_WORKER_GROUP_KEYS,
    LIFECYCLE_PARAMETERS_FILE,
    LIFECYCLE_PARAMETERS_KEYS,
    LIFECYCLE_PARAMETERS_VERSION,
    MOUNT_KEYS,
    UID_MAX,
    UID_MIN,
    USER_NAME_PATTERN,
    WORKER_GROUP_KEYS,
    ssh_key_ok,
    with_store_entries,
)
from fmcluster.runtime.node_setup.files import SetupError, clean, write_file
from fmcluster.runtime.profile import LEVELS, POLICIES
from fmcluster.runtime.stores import lifecycle_entries

# validation.policy on HyperPod on EKS nodes: fail (the lifecycle script fails; HyperPod provisions another instance),
# taint (the node reports; the node gate in the cluster keeps a failed node tainted), replace (as taint; the gate
# labels a node with a hardware fault for replacement), report. drain is Slurm's.
EKS_POLICIES = ("taint", "replace", "fail", "report")
_NAME = re.compile(USER_NAME_PATTERN)


def _known_keys(obj: Dict[str, Any], allowed: Iterable[str], where: str) -> None:
    """Keys the node does not know mean the synth side and the node disagree (contract drift): refuse them."""
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise SetupError(f"{where}: unknown key(s) {', '.join(unknown)}; this node knows {', '.join(allowed)}")


def _check_head(params: Dict[str, Any], workload_manager: str, keys: Iterable[str], names: Iterable[str]) -> None:
    """What every parameters file carries: its version, workload manager, known keys (each store's entry among them,
    checked as its node folder says) and the names it must give."""
    if params.get("version") != LIFECYCLE_PARAMETERS_VERSION:
        raise SetupError(f"{LIFECYCLE_PARAMETERS_FILE} version must be {LIFECYCLE_PARAMETERS_VERSION}, "
                             f"got {params.get('version')!r}")
    if params.get("workload_manager") != workload_manager:
        raise SetupError(f"workload_manager must be {workload_manager!r}, got {params.get('workload_manager')!r}")
    stores = lifecycle_entries(params)
    _known_keys(params, with_store_entries(tuple(keys), [m.KEY for m, _ in stores]), LIFECYCLE_PARAMETERS_FILE)
    for key in names:
        clean(params.get(key), key)
    for store, entry in stores:  # each store's entry, as its node folder reads it
        store.check(entry)


def _check_workers(params: Dict[str, Any], keys: Iterable[str], names: Iterable[str],
                   flags: Dict[str, bool]) -> List[Dict[str, Any]]:
    """worker_groups: a non-empty list of objects with known keys, the names given, and true/false flags (flag ->
    whether it is required)."""
    workers = params.get("worker_groups")
    if not isinstance(workers, list) or not workers:
        raise SetupError("worker_groups must be a non-empty list")
    for i, w in enumerate(workers):
        if not isinstance(w, dict):
            raise SetupError(f"worker_groups[{i}] must be an object")
        _known_keys(w, keys, f"worker_groups[{i}]")
        for key in names:
            clean(w.get(key), f"worker_groups[{i}].{key}")
        for key, required in flags.items():
            if not isinstance(w.get(key) if required else w.get(key, False), bool):
                raise SetupError(f"worker_groups[{i}].{key} must be true or false")
    return workers


def validate_params(params: Dict[str, Any]) -> Dict[str, Any]:
    """Check fmcluster_parameters.json and return it with defaults filled in."""
    _check_head(params, "slurm", LIFECYCLE_PARAMETERS_KEYS, ("cluster_name", "region", "controller_group"))
    out = dict(params)
    if params.get("login_group") is not None:
        clean(params["login_group"], "login_group")
    _check_workers(params, WORKER_GROUP_KEYS, ("instance_group_name", "partition_name", "instance_type"),
                   {"gpu": True, "efa": False})
    out["mounts"] = mounts_of(params)
    out["validation"] = _check_validation(params.get("validation"), default_policy="drain", policies=POLICIES)
    obs = params.get("observability")
    if obs is not None:
        if not isinstance(obs, dict):
            raise SetupError("observability must be an object or null")
        url = clean(obs.get("remote_write_url"), "observability.remote_write_url")
        if not url.startswith("https://"):
            raise SetupError("observability.remote_write_url must be an https:// URL")
        interval = obs.get("scrape_interval_seconds", 30)
        if not isinstance(interval, int) or isinstance(interval, bool) or not 1 <= interval <= 3600:
            raise SetupError("observability.scrape_interval_seconds must be an integer from 1 to 3600")
        if not isinstance(obs.get("gpu_job_map", False), bool):
            raise SetupError("observability.gpu_job_map must be true or false")
    users_of(out)
    return out


def users_of(params: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The ``users`` list, validated. Each: ``{"name", "uid", "home"?, "shell"?, "groups"?, "ssh_public_keys"?}``.

    A fixed uid is required: home directories and files on the shared file system must belong to the same id on
    every node."""
    users = params.get("users") or []
    if not isinstance(users, list):
        raise SetupError("users must be a list")
    out: List[Dict[str, Any]] = []
    seen_names, seen_uids = set(), set()
    for i, u in enumerate(users):
        if not isinstance(u, dict):
            raise SetupError(f"users[{i}] must be an object")
        name = u.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise SetupError(f"users[{i}].name must match {_NAME.pattern}, got {name!r}")
        uid = u.get("uid")
        if not isinstance(uid, int) or isinstance(uid, bool) or not UID_MIN <= uid <= UID_MAX:
            raise SetupError(f"users[{i}].uid must be an integer from {UID_MIN} to {UID_MAX} (same on every node), "
                                 f"got {uid!r}")
        if name in seen_names or uid in seen_uids:
            raise SetupError(f"users[{i}]: name {name} or uid {uid} is used twice")
        seen_names.add(name)
        seen_uids.add(uid)
        home = clean(u.get("home", f"/home/{name}"), f"users[{i}].home")
        shell = clean(u.get("shell", "/bin/bash"), f"users[{i}].shell")
        if not home.startswith("/") or " " in home or not shell.startswith("/") or " " in shell:
            raise SetupError(f"users[{i}].home and .shell must be absolute paths without spaces")
        groups = u.get("groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) and _NAME.match(g) for g in groups):
            raise SetupError(f"users[{i}].groups must be a list of group names")
        keys = u.get("ssh_public_keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) and ssh_key_ok(k) for k in keys):
            raise SetupError(f"users[{i}].ssh_public_keys must be a list of one-line OpenSSH public keys")
        out.append({"name": name, "uid": uid, "home": home, "shell": shell, "groups": groups, "ssh_public_keys": keys})
    return out


def _check_validation(validation: Any, *, default_policy: str, policies: Iterable[str], where: str = "") -> Dict[str, str]:
    """The parameters' validation section: level and policy, each one of those allowed."""
    validation = validation or {}
    level, policy = validation.get("level", "standard"), validation.get("policy", default_policy)
    if level not in LEVELS:
        raise SetupError(f"validation.level must be one of {', '.join(LEVELS)}, got {level!r}")
    if policy not in policies:
        raise SetupError(f"validation.policy must be one of {', '.join(policies)}{where}, got {policy!r}")
    return {"level": level, "policy": policy}


def mounts_of(params: Dict[str, Any]) -> List[Dict[str, str]]:
    """The ``mounts`` list (absent: none): each ``{"store", "path", "script", "failure"}``, its path absolute and
    its script non-empty text the node runs as it is."""
    mounts = params.get("mounts") or []
    if not isinstance(mounts, list):
        raise SetupError("mounts must be a list")
    seen = set()
    for i, m in enumerate(mounts):
        if not isinstance(m, dict):
            raise SetupError(f"mounts[{i}] must be an object")
        _known_keys(m, MOUNT_KEYS, f"mounts[{i}]")
        for key in ("store", "path", "failure"):
            clean(m.get(key), f"mounts[{i}].{key}")
        if not m["path"].startswith("/") or m["path"] == "/" or " " in m["path"]:
            raise SetupError(f"mounts[{i}].path must be an absolute path below / without spaces, got {m['path']!r}")
        if m["path"] in seen:
            raise SetupError(f"mounts[{i}].path {m['path']} is mounted twice")
        seen.add(m["path"])
        if not isinstance(m.get("script"), str) or not m["script"].strip() or "\0" in m["script"]:
            raise SetupError(f"mounts[{i}].script must be a non-empty shell script")
    return [dict(m) for m in mounts]


def validate_eks_params(params: Dict[str, Any]) -> Dict[str, Any]:
    """Check the HyperPod on EKS parameters (``workload_manager: eks``) and return them with defaults filled in."""
    _check_head(params, "eks", EKS_LIFECYCLE_PARAMETERS_KEYS, ("cluster_name", "region", "system_group"))
    out = dict(params)
    workers = _check_workers(params, EKS_WORKER_GROUP_KEYS, ("instance_group_name", "instance_type"),
                             {"gpu": True, "efa": True, "instance_store": False})
    if params["system_group"] in {w["instance_group_name"] for w in workers}:
        raise SetupError(f"system_group {params['system_group']!r} is also a worker group")
    out["mounts"] = mounts_of(params)
    out["validation"] = _check_validation(params.get("validation"), default_policy="taint", policies=EKS_POLICIES,
                                          where=" on EKS nodes")
    obs = params.get("observability")
    if obs is not None:
        if not isinstance(obs, dict) or set(obs) - set(EKS_OBSERVABILITY_KEYS):
            raise SetupError(f"observability must be null or an object of {', '.join(EKS_OBSERVABILITY_KEYS)}")
        if not isinstance(obs.get("efa_textfile", False), bool):
            raise SetupError("observability.efa_textfile must be true or false")
    return out


def write_mounts(params: Dict[str, Any], directory: str) -> List[Tuple[str, str, str, str]]:
    """Check the parameters (by their workload manager) and write each listed mount's script to `directory` as
    ``<n>-<store>.sh`` (root's alone: it runs as root); (store, path, script file, failure) each, in order."""
    check = validate_eks_params if params.get("workload_manager") == "eks" else validate_params
    found = []
    for i, m in enumerate(check(params)["mounts"]):
        path = os.path.join(directory, f"{i}-{re.sub(r'[^A-Za-z0-9_.-]', '_', m['store'])}.sh")
        write_file(path, m["script"])
        os.chmod(path, 0o700)
        found.append((m["store"], m["path"], path, m["failure"]))
    return found

"""Which node this is and what its lifecycle steps must do, as ``key<TAB>value`` answers the shell scripts read.

How a HyperPod Slurm node finds itself: HyperPod writes every instance's ``CustomerIpAddress`` (its address in the
customer VPC) into resource_config.json; AWS's public base-config lifecycle scripts match the node's primary IPv4
address against that field. We do the same, checking every local IPv4 address (primary first), and fall back to the
instance name == hostname only when no address matches. Each instance group's entry script names its group, so the
file only adds addresses (and must agree). A HyperPod on EKS node knows its group from its entry script alone."""

from __future__ import annotations

import re
import socket
from typing import Any, Dict, Iterable, List, Optional, Tuple

from fmcluster.runtime.contract import LIFECYCLE_PARAMETERS_FILE
from fmcluster.runtime.node_setup.files import SetupError, clean
from fmcluster.runtime.node_setup.parameters import users_of, validate_eks_params, validate_params
from fmcluster.runtime.rooted import under
from fmcluster.runtime.stores import lifecycle_entries


def _cluster_answers(params: Dict[str, Any], efa: bool) -> Dict[str, str]:
    """The answers every HyperPod node shares: its cluster, each store's entry as this node mounts it (the store's
    node/lifecycle.py), validation."""
    stores: Dict[str, str] = {}
    keys = []
    for store, entry in lifecycle_entries(params):
        stores.update(store.answers(entry, efa))
        keys.append(store.KEY)
    return {
        "cluster": params["cluster_name"],
        "region": params["region"],
        **stores,
        # the entries the scripts must have a step for (common.sh check_store_entries)
        "store_entries": ",".join(keys),
        "level": params["validation"]["level"],
        "policy": params["validation"]["policy"],
    }


def eks_node(params: Dict[str, Any], group: str) -> Dict[str, str]:
    """Everything on_create_eks.sh needs for a node of instance group `group` (its entry script names the group)."""
    params = validate_eks_params(params)
    clean(group, "--group")
    workers = {w["instance_group_name"]: w for w in params["worker_groups"]}
    if group == params["system_group"]:
        role, gpu, efa, instance_type, instance_store = "system", False, False, "", False
    elif group in workers:
        role, gpu, efa = "worker", workers[group]["gpu"], workers[group]["efa"]
        instance_type = workers[group]["instance_type"]
        instance_store = workers[group].get("instance_store", False)
    else:
        raise SetupError(f"instance group {group!r} is neither the system_group nor one of the worker_groups in "
                             f"{LIFECYCLE_PARAMETERS_FILE}")
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
        **_cluster_answers(params, efa),
        # on the node: fail stops provisioning; taint and report only report, and the node gate acts on taint
        "node_policy": "fail" if policy == "fail" else "report",
        "efa_textfile": "1" if obs.get("efa_textfile") and efa else "0",
    }


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
        raise SetupError("resource_config.json has no InstanceGroups list")
    addresses = list(addresses)
    for addr in addresses:
        hits = [(g, i) for g in groups for i in (g.get("Instances") or []) if i.get("CustomerIpAddress") == addr]
        if len(hits) > 1:
            raise SetupError(f"address {addr} appears {len(hits)} times in resource_config.json")
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
    raise SetupError(f"this node ({', '.join(addresses) or 'no IPv4 address'}; hostname {hostname or '?'}) "
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
        except SetupError:
            if group_name is None:
                raise
    elif group_name is None:
        raise SetupError("no resource_config.json and no instance group named by the entry script: cannot tell "
                             "which group this node is in")
    if group_name is not None:
        listed = group.get("Name")
        if listed is not None and listed != group_name:
            raise SetupError(f"resource_config.json puts this node in instance group {listed!r}, its lifecycle "
                                 f"entry script in {group_name!r}")
        group = dict(group, Name=group_name)
    name = clean(group.get("Name"), "InstanceGroups[].Name")
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
        raise SetupError(f"instance group {name!r} is neither the controller_group, the login_group nor one of "
                             "the worker_groups in fmcluster_parameters.json")
    controllers = [i.get("CustomerIpAddress", "") for g in (resource_config or {}).get("InstanceGroups") or []
                   if g.get("Name") == params["controller_group"] for i in (g.get("Instances") or [])]
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
        **_cluster_answers(params, efa),
        "observability": "1" if obs else "0",
        "remote_write_url": obs.get("remote_write_url", ""),
        "scrape_interval": str(obs.get("scrape_interval_seconds", 30)) if obs else "",
        "gpu_job_map": "1" if obs.get("gpu_job_map") else "0",
        "users": str(len(users_of(params))),
    }

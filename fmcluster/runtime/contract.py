"""The node contract: every fact the synth side (spec, constructs) and the node side (validator, lifecycle
scripts) must agree on, written once. Standard library only: the nodes run it; the spec imports it.

    python3 -m fmcluster.runtime.contract agent-unit --profile FILE   # the systemd unit of the profile's agent
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

# --- instance types -----------------------------------------------------------------------------------------
# SageMaker names instance types with an ml. prefix (ml.p5.48xlarge); EC2, EKS, PCS and ParallelCluster do not.
ML_PREFIX = "ml."


def ec2_type(instance_type: str) -> str:
    """``ml.p5.48xlarge`` -> ``p5.48xlarge``; EC2 names pass through."""
    t = instance_type.strip()
    return t[len(ML_PREFIX):] if t.startswith(ML_PREFIX) else t


def ml_type(instance_type: str) -> str:
    """``p5.48xlarge`` -> ``ml.p5.48xlarge``; ml. names pass through."""
    t = instance_type.strip()
    return t if t.startswith(ML_PREFIX) else ML_PREFIX + t


# --- the orchestrator's node agent --------------------------------------------------------------------------
# agent (NodeProfile.orchestrator, OrchestratorKind.nodes.agent) -> the systemd unit that runs it on a node
AGENT_UNITS: Dict[str, str] = {"slurm": "slurmd", "kubernetes": "kubelet"}
NODE_AGENTS = tuple(AGENT_UNITS)


def agent_unit(agent: Optional[str]) -> Optional[str]:
    """The unit a drain or taint waits for; None without an agent."""
    if agent is None:
        return None
    if agent not in AGENT_UNITS:
        raise ValueError(f"agent {agent!r} is not one of {', '.join(NODE_AGENTS)}")
    return AGENT_UNITS[agent]


# --- users created on every node ----------------------------------------------------------------------------
USER_NAME_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"
# Fixed uids keep files on the shared file system owned by one user everywhere; below 2000 clashes with the
# AMIs' own users (the DLAMI's ubuntu is 1000).
UID_MIN, UID_MAX = 2000, 60000
# OpenSSH public key types accepted in authorized_keys. DSA (ssh-dss) is left out: OpenSSH disabled it by default
# in 7.0 and removed it in 9.8 (OpenSSH release notes), so a node's sshd would ignore such a key.
SSH_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
SSH_KEY_PATTERN = r"^(" + "|".join(re.escape(t) for t in SSH_KEY_TYPES) + r") [A-Za-z0-9+/]+={0,3}( [^\n\r]*)?$"


def ssh_key_ok(line: str) -> bool:
    """One authorized_keys line: a type we accept, its base64 body, an optional comment."""
    return re.match(SSH_KEY_PATTERN, line) is not None


# --- where node data lives ----------------------------------------------------------------------------------
# The instance NVMe on every kind (the node-local tier, platforms/storage/instance_nvme/tier.py): where the DLAMI's
# dlami-nvme and ParallelCluster's EphemeralVolume mount it, and EKS nodes bind a directory of nodeadm's array.
INSTANCE_NVME_ROOT = "/opt/dlami/nvme"
HYPERPOD_EBS_ROOT = "/opt/sagemaker"  # HyperPod: the instance group's extra EBS volume (InstanceStorageConfigs)
DOCKER_DATA_ROOT_KEY = "data-root"  # daemon.json
ENROOT_PATH_KEYS = ("ENROOT_RUNTIME_PATH", "ENROOT_CACHE_PATH", "ENROOT_DATA_PATH", "ENROOT_TEMP_PATH")

# Kubernetes node data the HyperPod on EKS lifecycle moves onto the instance store (bind mounts, as nodeadm's RAID0
# local-storage strategy does on EKS managed nodes): containerd's root, the kubelet's root (pods' emptyDirs), pod logs.
KUBERNETES_DATA_DIRS = (("containerd", "/var/lib/containerd"), ("kubelet", "/var/lib/kubelet"),
                        ("pod-logs", "/var/log/pods"))

# --- HyperPod lifecycle parameters --------------------------------------------------------------------------
# fmcluster_parameters.json beside the lifecycle scripts: rendered at synth, read by runtime/node_setup/parameters.py.
# workload_manager says which layout: slurm (on_init_complete.sh) or eks (on_create_eks.sh).
LIFECYCLE_PARAMETERS_FILE = "fmcluster_parameters.json"
LIFECYCLE_PARAMETERS_VERSION = 1
# Each store with a lifecycle form has its entry just before mounts, under its key (a store's node/lifecycle.py KEY,
# found by layout: fmcluster/runtime/stores.py; with_store_entries puts them there).
LIFECYCLE_PARAMETERS_KEYS = ("version", "workload_manager", "cluster_name", "region", "controller_group",
                             "login_group", "worker_groups", "mounts", "validation", "observability", "users")
WORKER_GROUP_KEYS = ("instance_group_name", "partition_name", "instance_type", "gpu", "efa")
# mounts: the stores without an entry of their own, each a script the node runs (platforms/hyperpod/mounts.py)
MOUNT_KEYS = ("store", "path", "script", "failure")
USER_KEYS = ("name", "uid", "groups", "ssh_public_keys")
EKS_LIFECYCLE_PARAMETERS_KEYS = ("version", "workload_manager", "cluster_name", "region", "system_group",
                                 "worker_groups", "mounts", "validation", "observability")
# instance_store: the type has instance-store NVMe (catalog), so a GPU node waits for /opt/dlami/nvme
EKS_WORKER_GROUP_KEYS = ("instance_group_name", "instance_type", "gpu", "efa", "instance_store")
EKS_OBSERVABILITY_KEYS = ("efa_textfile",)


def with_store_entries(keys: Tuple[str, ...], entries: Sequence[str]) -> Tuple[str, ...]:
    """A parameters layout's keys with the stores' entry keys (in store order) just before ``mounts``."""
    at = keys.index("mounts")
    return (*keys[:at], *entries, *keys[at:])


# The entry script HyperPod runs on an EKS node of group G (LifeCycleConfig.OnCreate): it names its group, so the node
# needs no lookup in HyperPod's resource_config.json.
EKS_ENTRY_SCRIPT = "on_create.{group}.sh"
# HyperPod Slurm: each instance group's OnInitComplete, which runs lifecycle/on_init_complete.sh --group <group>.
SLURM_ENTRY_SCRIPT = "on_init_complete.{group}.sh"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m fmcluster.runtime.contract")
    sub = ap.add_subparsers(dest="command", required=True)
    unit = sub.add_parser("agent-unit", help="print the systemd unit of the profile's orchestrator agent, or none")
    unit.add_argument("--profile", required=True)
    args = ap.parse_args(argv)
    try:
        with open(args.profile, encoding="utf-8") as fh:
            agent = json.load(fh).get("orchestrator")
        print(agent_unit(agent) or "none")
    except (OSError, ValueError, AttributeError) as exc:
        print(f"agent-unit: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

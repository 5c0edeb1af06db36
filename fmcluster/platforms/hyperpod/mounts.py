"""The stores HyperPod's nodes mount themselves, as the lifecycle parameters carry them: a store with a lifecycle
form under its own key (the node scripts know its entry), every other one in the generic ``mounts`` list built from
its boot form (its client's install and its mount, as one script the node runs under a timeout and judges by
validation.policy: node/README.md). The platform names the images its services boot, so a store's client says how
it installs there."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from fmcluster.platforms.storage import Mounts
from fmcluster.platforms.storage.forms import Mount

# HyperPod's AMIs, as a store's NodeClient names them: Slurm's is built on the Deep Learning Base GPU AMI (Ubuntu)
# (SageMaker guide, "SageMaker HyperPod references", DLAMI); EKS's on Amazon Linux (docs/storage.md has the sources
# and what is unverified).
SLURM_IMAGE = "hyperpod-slurm"
EKS_IMAGE = "hyperpod-eks"
IMAGES = (SLURM_IMAGE, EKS_IMAGE)
KEY = "mounts"  # the list's key in the lifecycle parameters (runtime/contract.py MOUNT_KEYS)


def listed(mount: Mount, image: str) -> Dict[str, Any]:
    """One entry of the list: the store (messages), where it mounts, the script, and what the log says on failure.
    The plain command, never the EFA one: a store reached over EFA has its own lifecycle entry."""
    if mount.boot is None:
        raise ValueError(f"mounts: store {mount.store} has neither a lifecycle form nor a boot form; HyperPod's "
                         "lifecycle scripts cannot mount it on the nodes")
    return {"store": mount.store, "path": mount.path, "script": mount.boot.script(image=image),
            "failure": mount.boot.failure}


def lifecycle_mounts(mounts: Mounts, by_nodes: Sequence[Mount], *, image: str) -> Dict[str, Any]:
    """The lifecycle parameters' stores for `by_nodes` (the mounts HyperPod leaves to the nodes): every registered
    store's key (null where it is not among them) and the list of the others, in the registry's order."""
    entries = [m for m in by_nodes if m.lifecycle is not None]
    found: List[Dict[str, Any]] = [listed(m, image) for m in by_nodes if m.lifecycle is None]
    return {**mounts.lifecycle_parameters(entries), KEY: found}

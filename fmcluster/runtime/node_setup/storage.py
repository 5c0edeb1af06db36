"""Where container data goes on a node: the instance NVMe, else HyperPod's secondary EBS volume, never the root
volume; and the Kubernetes data directories bind-mounted there through fstab."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from fmcluster.runtime import mounts
from fmcluster.runtime.contract import HYPERPOD_EBS_ROOT, INSTANCE_NVME_ROOT, KUBERNETES_DATA_DIRS
from fmcluster.runtime.node_setup.files import SetupError, write_file
from fmcluster.runtime.rooted import read_text

NVME_ROOT = INSTANCE_NVME_ROOT
EBS_ROOT = HYPERPOD_EBS_ROOT


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


def container_layout(base: str) -> List[Tuple[str, str, str]]:
    """(name, the directory containerd/kubelet use, where its data goes under `base`)."""
    if not base.startswith("/") or base == "/":
        raise SetupError(f"--base must be an absolute directory below /, got {base!r}")
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
    for i in mounts.fstab_lines_on(lines, target):
        fields = lines[i].split()
        if fields[:2] == [source, target] and len(fields) > 3 and "bind" in fields[3].split(","):
            return False
        raise SetupError(f"/etc/fstab already mounts {fields[0]} on {target}; not adding the bind mount of {source}")
    write_file(path, "\n".join(lines + [line]) + "\n")
    return True

"""Where container data goes on a node: the instance NVMe, else HyperPod's secondary EBS volume, never the root
volume; the Kubernetes data directories bind-mounted there through fstab; and, on EKS nodes, the instance NVMe's tier
path bound to a directory of nodeadm's array by a systemd mount unit (`bind_unit`)."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from fmcluster.runtime import mounts
from fmcluster.runtime.contract import HYPERPOD_EBS_ROOT, INSTANCE_NVME_ROOT, KUBERNETES_DATA_DIRS
from fmcluster.runtime.node_setup.files import SetupError, write_file
from fmcluster.runtime.rooted import read_text, under

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


def mount_unit_name(path: str) -> str:
    """The systemd mount unit of `path`, as ``systemd-escape --path --suffix=mount`` names it (systemd.unit(5), "String
    Escaping for Inclusion in Unit Names"): slashes trimmed and turned into '-', every byte but ASCII letters, digits,
    ':', '_' and a non-leading '.' written as \\xNN."""
    if not path.startswith("/"):
        raise SetupError(f"{path!r} is not an absolute path")
    trimmed = "/".join(p for p in path.split("/") if p)
    if not trimmed:
        return "-.mount"
    out = []
    for i, byte in enumerate(trimmed.encode("utf-8")):
        c = chr(byte)
        if c == "/":
            out.append("-")
        elif (c.isascii() and c.isalnum()) or c in ":_" or (c == "." and i > 0):
            out.append(c)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out) + ".mount"


def bind_unit(unit_dir: str, source: str, target: str, requires: str, root: str = "/") -> Tuple[str, bool]:
    """Write a systemd mount unit that bind-mounts `source` (a directory it creates on the file system mounted at
    `requires`) on `target`, wanted by multi-user.target as nodeadm's own local-disk units are, so a missing array
    fails this unit alone and never sends the boot to emergency mode (an fstab line would: local-fs.target requires
    it). Refused unless `requires` is a mount point of its own, so the directory never lands on the root volume.
    Returns (unit name, whether the file changed); the caller enables it."""
    for name, value in (("source", source), ("target", target), ("requires", requires)):
        if not value.startswith("/") or value == "/" or any(c in value for c in " \t\n\\"):
            raise SetupError(f"--{name} must be an absolute path below / without spaces or backslashes, got {value!r}")
    if not source.startswith(requires.rstrip("/") + "/"):
        raise SetupError(f"--source {source} is not below --requires {requires}")
    table = mount_points(root)
    if requires not in table or table.get("/") == table[requires]:
        raise SetupError(f"{requires} is not a mount point of its own: not binding {target} to the root volume")
    for directory in (source, target):
        os.makedirs(under(root, directory), exist_ok=True)
    name = mount_unit_name(target)
    text = (f"[Unit]\nDescription=fmcluster: the instance NVMe at {target}\nRequiresMountsFor={requires}\n\n"
            f"[Mount]\nWhat={source}\nWhere={target}\nType=none\nOptions=bind\n\n"
            "[Install]\nWantedBy=multi-user.target\n")
    path = os.path.join(under(root, unit_dir), name)
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return name, False
    except FileNotFoundError:
        pass
    write_file(path, text)
    return name, True

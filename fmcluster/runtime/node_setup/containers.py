"""Container runtimes' own configuration pointed at the node's storage root: docker's data-root, enroot's paths."""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict

from fmcluster.runtime.node_setup.files import load_json, write_file


def docker_config(path: str, data_root: str) -> bool:
    """Set ``data-root`` in docker's daemon.json, keeping every other key. True when the file changed.

    Docker Engine 29+ fresh installs keep images in containerd's image store (/var/lib/containerd, on the root
    volume) whatever data-root says; unless the file chooses explicitly, the classic store is kept so images
    follow data-root onto the NVMe (Docker docs, "containerd image store")."""
    current: Dict[str, Any] = {}
    if os.path.exists(path):
        current = load_json(path, "docker daemon.json")
    wanted = dict(current, **{"data-root": data_root})
    features = dict(current.get("features") or {})
    features.setdefault("containerd-snapshotter", False)
    wanted["features"] = features
    if wanted == current:
        return False
    write_file(path, json.dumps(wanted, indent=2, sort_keys=True) + "\n")
    return True



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
    write_file(path, "\n".join(out) + "\n")
    return True

"""Prometheus text exposition helpers for the textfile collectors (standard library only)."""

from __future__ import annotations

import os
import tempfile
from typing import Dict, Iterable, List, Tuple

Sample = Tuple[Dict[str, str], float]


def label_value(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def family(name: str, type_: str, help_: str, samples: Iterable[Sample]) -> List[str]:
    lines = [f"# HELP {name} {help_}", f"# TYPE {name} {type_}"]
    for labels, value in samples:
        lab = ",".join(f'{k}="{label_value(v)}"' for k, v in sorted(labels.items()))
        num = repr(float(value)) if not float(value).is_integer() else str(int(value))
        lines.append(f"{name}{{{lab}}} {num}" if lab else f"{name} {num}")
    return lines


def write_atomic(path: str, text: str) -> None:
    """Temporary file in the same directory, then rename: node_exporter never reads half a file."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".fmcluster-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

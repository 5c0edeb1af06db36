"""Prometheus text exposition helpers for the textfile collectors (standard library only)."""

from __future__ import annotations

import sys
from typing import Dict, Iterable, List, Tuple

from fmcluster.runtime.report import write_atomic  # one atomic writer for every textfile

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


def emit(text: str, out: str, prog: str) -> int:
    """Write a collector's textfile atomically (or to stdout for '-'); exit status for main()."""
    if out == "-":
        sys.stdout.write(text)
        return 0
    try:
        write_atomic(out, text)
    except OSError as exc:
        print(f"{prog}: cannot write {out}: {exc}", file=sys.stderr)
        return 1
    return 0

"""Write the dcgm-exporter field list for this node: the fields every GPU shares plus its architecture's.

    python3 -m fmcluster.runtime.observability.dcgm_fields [--instance-type TYPE] [--root DIR] --out FILE

NVLink error counters differ per GPU architecture: Hopper (NVLink4) reports replay and recovery totals, Blackwell
(NVLink5) a family of its own that NVLink4 does not support. The node's instance type (DMI, or --instance-type)
gives its ``gpu_arch`` from the catalog (runtime/catalog.json); ``dcgm-counters-<gpu_arch>.csv`` beside this
module is appended to ``dcgm-counters.csv``. An instance type or architecture without a file gets the shared
fields only, and says so. Exit 0 written, 1 the file could not be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Tuple

from fmcluster.runtime.observability.collector_config import node_identity
from fmcluster.runtime.profile import ProfileError, catalog_facts

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "dcgm-counters.csv")


def arch_file(gpu_arch: str) -> str:
    return os.path.join(HERE, f"dcgm-counters-{gpu_arch}.csv")


def gpu_arch_of(instance_type: str) -> Optional[str]:
    try:
        arch = catalog_facts(instance_type).get("gpu_arch")
    except ProfileError:
        return None
    return str(arch) if arch else None


def field_list(instance_type: Optional[str]) -> Tuple[str, Optional[str]]:
    """(the CSV text for a node of `instance_type`, the architecture whose fields it includes, or None)."""
    with open(SHARED, encoding="utf-8") as fh:
        text = fh.read()
    arch = gpu_arch_of(instance_type) if instance_type else None
    if arch is None or not os.path.exists(arch_file(arch)):
        return text, None
    with open(arch_file(arch), encoding="utf-8") as fh:
        return text.rstrip("\n") + "\n\n" + fh.read(), arch


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="dcgm_fields", description=__doc__.splitlines()[0])
    ap.add_argument("--instance-type", help="default: the node's, from DMI")
    ap.add_argument("--root", default="/", help="prefix for /sys reads (tests)")
    ap.add_argument("--out", required=True, help="file to write ('-' for stdout)")
    args = ap.parse_args(argv)
    instance_type = args.instance_type or node_identity(args.root).get("instance_type")
    text, arch = field_list(instance_type)
    if arch is None:
        print(f"dcgm_fields: no per-architecture fields for {instance_type or 'an unknown instance type'}; "
              "NVLink error counters are not collected", file=sys.stderr)
    else:
        print(f"dcgm_fields: {instance_type} is {arch}: dcgm-counters-{arch}.csv appended", file=sys.stderr)
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    try:
        tmp = f"{args.out}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, args.out)
    except OSError as exc:
        print(f"dcgm_fields: cannot write {args.out}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

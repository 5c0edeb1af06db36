"""Measure: how much each node group adds to the largest synthesized template, per example spec.

    python3 bench/template_growth.py [--groups 9] [EXAMPLE ...]   (default: every example)

For each example, synthesizes it as written and with its first node group repeated until it has GROUPS groups (the
copies renamed, one node each), then prints the growth per added group of the largest template's bytes, resources
and outputs. fmcluster.spec.limits.MAX_NODE_GROUPS is derived from these numbers and CloudFormation's quotas
(1 MB template body from S3, 500 resources, 200 outputs per stack); docs/architecture.md says how.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def largest(templates: Dict[str, Dict[str, Any]]) -> Tuple[int, int, int]:
    """(bytes, resources, outputs), each the largest over the stacks."""
    sizes = [(len(json.dumps(t, indent=1)), len(t.get("Resources", {})), len(t.get("Outputs", {})))
             for t in templates.values()]
    return tuple(max(s[i] for s in sizes) for i in range(3))  # type: ignore[return-value]


def main() -> int:
    from fmcluster.app import synthesize
    from fmcluster.registry import parse_spec

    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=9)
    ap.add_argument("examples", nargs="*")
    args = ap.parse_args()
    names = args.examples or sorted(p.stem for p in (ROOT / "examples").glob("*.yaml"))
    for name in names:
        data = yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())
        base = largest(synthesize(parse_spec(data)))
        more = copy.deepcopy(data)
        first = more["node_groups"][0]
        for i in range(len(more["node_groups"]), args.groups):
            extra = copy.deepcopy(first)
            extra.update(name=f"copy{i}", count=1)
            extra.get("capacity", {}).pop("size", None)
            more["node_groups"].append(extra)
        added = args.groups - len(data["node_groups"])
        grown = largest(synthesize(parse_spec(more)))
        per = [(g - b) / added for g, b in zip(grown, base)]
        print(f"{name}: {len(data['node_groups'])} group(s) {base[0] / 1024:.0f} KB {base[1]} resources "
              f"{base[2]} outputs; per added group {per[0] / 1024:.1f} KB, {per[1]:.1f} resources, {per[2]:.1f} outputs",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

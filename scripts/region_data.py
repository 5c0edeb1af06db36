"""Write fmcluster/spec/regions.json: the Regions of AWS's commercial partition, from the installed botocore's
partitions.json, and in which of them EC2 offers each catalog instance type, from the installed cfn-lint's per-region
instance-type data. Run after a botocore or cfn-lint update in requirements.lock (tests/spec/test_regions.py fails
while the file and the packages disagree); `as_of` is the day it ran.

    python scripts/region_data.py [--check]
"""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Dict

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "fmcluster" / "spec" / "regions.json"
PARTITION = "aws"  # the spec's region pattern takes commercial Regions only
OFFERINGS = Path("data") / "schemas" / "extensions" / "aws_ec2_instance" / "instancetype_enum.json"


def _package_dir(name: str) -> Path:
    """Where a package lives, without importing it (cfnlint's import alone takes seconds)."""
    found = importlib.util.find_spec(name)
    assert found is not None and found.origin is not None, f"{name} is not installed"
    return Path(found.origin).parent


def from_packages() -> Dict[str, Any]:
    botocore_version, cfnlint_version = metadata.version("botocore"), metadata.version("cfn-lint")
    partitions = json.loads((_package_dir("botocore") / "data" / "partitions.json").read_text())
    (aws,) = [p for p in partitions["partitions"] if p["id"] == PARTITION]
    regions = sorted(r for r in aws["regions"] if not r.endswith("-global"))
    catalog = json.loads((ROOT / "fmcluster" / "runtime" / "catalog.json").read_text())["types"]
    by_region = json.loads((_package_dir("cfnlint") / OFFERINGS).read_text())
    offered = {t: sorted(r for r in regions if t in by_region.get(r, {}).get("enum", [])) for t in sorted(catalog)}
    return {
        "_about": "Written by scripts/region_data.py from the pinned packages; never edit by hand.",
        "regions": {"source": f"botocore {botocore_version}, data/partitions.json, partition {PARTITION}",
                    "names": regions},
        "offerings": {"source": f"cfn-lint {cfnlint_version}, {OFFERINGS.as_posix()} (EC2 instance types "
                                "offered per Region)",
                      "as_of": datetime.now(timezone.utc).date().isoformat(), "types": offered},
    }


def same(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    """Equal but for the day each was read."""
    def strip(d: Dict[str, Any]) -> Dict[str, Any]:
        return {**d, "offerings": {k: v for k, v in d["offerings"].items() if k != "as_of"}}
    return strip(a) == strip(b)


def main(argv: list) -> int:
    data = from_packages()
    if "--check" in argv:
        return 0 if TARGET.exists() and same(json.loads(TARGET.read_text()), data) else 1
    TARGET.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(data['regions']['names'])} regions and {len(data['offerings']['types'])} types to {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Where things exist: the Regions AWS's commercial partition has (a spec naming another is refused) and in which of
them EC2 offers each catalog instance type (a group of a type with no offering there is warned about). Both from the
pinned packages' data, copied into regions.json by scripts/region_data.py; `fmcluster preflight` is the live check."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List

from fmcluster.runtime.contract import ec2_type
from fmcluster.spec.orchestrator import SpecWarning

DATA = Path(__file__).resolve().parent / "regions.json"


@lru_cache(maxsize=1)
def data() -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return loaded


def known() -> List[str]:
    return list(data()["regions"]["names"])


def unknown_region(region: str) -> str:
    """Why `region` is refused: what the data is and which Regions it names."""
    return (f"{region!r} is not a Region of AWS's partition data ({data()['regions']['source']}); one of "
            f"{', '.join(known())}")


def offering_warnings(spec: Any) -> List[SpecWarning]:
    """A node group (or an instance the kind adds) whose EC2 type the data does not list in the spec's Region. Kinds
    whose instances run in a service's account (HyperPod) are skipped: the data is EC2's own offerings."""
    kind = spec.orchestrator_kind
    if not kind.nodes.in_account:
        return []
    offerings = data()["offerings"]
    said = f"the data ({offerings['source']}, read {offerings['as_of']})"
    found: List[SpecWarning] = []
    wanted = [(f"node_groups[{i}].instance_type", g.instance_type) for i, g in enumerate(spec.node_groups)]
    wanted += [(f"orchestrator ({extra.role})", extra.instance_type) for extra in kind.extra_instances(spec)]
    for path, instance_type in wanted:
        regions = offerings["types"].get(ec2_type(instance_type))
        if regions is None or spec.region in regions:
            continue
        where = f"it lists it in {', '.join(regions)}" if regions else "it lists it in no Region"
        found.append(SpecWarning(path, f"{instance_type} has no EC2 offering in {spec.region} in {said}; {where}. It may "
                                       "not launch there (Capacity Blocks and training plans can sell types the data "
                                       "lacks), and plan prices it at the us-east-1 rate; fmcluster preflight reads "
                                       "the account's offerings"))
    return found

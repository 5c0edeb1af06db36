"""Instance facts: one entry per instance type, each fact with its source.

The table itself is ``runtime/catalog.json`` so that the node-side validator (standard
library only) reads the very same data; this module gives it types and derived figures.
Spec validation, the EFA launch-template layout, ``plan`` and node expectations all read
from here — never from a second table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.runtime.contract import ec2_type

CATALOG_PATH = Path(__file__).parent / "runtime" / "catalog.json"


@dataclass(frozen=True)
class InstanceType:
    """Facts about one EC2 instance type (units as DescribeInstanceTypes)."""

    name: str
    family: str
    gpu: Optional[str]
    gpu_arch: Optional[str]
    gpus: int
    gpu_memory_mib: int
    hbm_tbps: float
    bf16_dense_tflops: float
    fp8_dense_tflops: float
    nvlink_gbs_per_gpu: float
    nvlink_links_per_gpu: int
    nvlink_domain_gpus: int
    efa_generation: int
    network_cards: int
    efa_interfaces: int
    efa_cards: Tuple[int, ...]
    max_interfaces_per_card: Optional[int]
    network_gbps: float
    efa_gbps: float
    vcpus: int
    memory_mib: int
    nvme_gb: Optional[int]
    nvme_disks: Optional[int]
    architecture: str
    min_versions: Dict[str, str] = field(default_factory=dict)
    sources: Dict[str, List[str]] = field(default_factory=dict)
    unverified: Tuple[str, ...] = ()
    notes: str = ""

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def efa_supported(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def card_gbps(self) -> float:
        """One network card's share of the instance's bandwidth: what the planner takes a node's one ENA interface
        (card 0) to carry, for traffic that does not use EFA (docs/planning.md compares it with AWS's figures)."""
        return self.network_gbps / max(self.network_cards, 1)

    @property
    def card0_carries_efa(self) -> bool:
        return 0 in self.efa_cards

    @property
    def ip_interfaces(self) -> int:
        """IP-consuming interfaces per node in our launch-template layout.

        Card 0 device 0 is the one ENA ``interface``; every EFA interface is ``efa-only``
        and takes no IP (EC2 user guide), so a node costs one address, EFA or not.
        """
        return 1

    def is_verified(self, fact: str) -> bool:
        return fact not in self.unverified

    def summary(self) -> Dict[str, Any]:
        """The JSON shape `fmcluster catalog --json` prints (DescribeInstanceTypes units)."""
        return {
            "gpu": self.gpu,
            "gpus": self.gpus,
            "gpu_memory_mib": self.gpu_memory_mib,
            "hbm_tbps": self.hbm_tbps,
            "bf16_dense_tflops": self.bf16_dense_tflops,
            "fp8_dense_tflops": self.fp8_dense_tflops,
            "nvlink_gbs_per_gpu": self.nvlink_gbs_per_gpu,
            "nvlink_domain_gpus": self.nvlink_domain_gpus,
            "efa_generation": self.efa_generation,
            "vcpus": self.vcpus,
            "memory_mib": self.memory_mib,
            "network_cards": self.network_cards,
            "efa_interfaces": self.efa_interfaces,
            "efa_cards": list(self.efa_cards),
            "nvme_gb": self.nvme_gb,
            "network_gbps": self.network_gbps,
            "efa_gbps": self.efa_gbps,
            "architecture": self.architecture,
            "min_versions": dict(self.min_versions),
            "unverified": list(self.unverified),
            "sources": self.sources,
            "notes": self.notes,
        }


def _load() -> Dict[str, InstanceType]:
    raw = json.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    out: Dict[str, InstanceType] = {}
    for name, facts in raw["types"].items():
        facts = dict(facts)
        facts["efa_cards"] = tuple(facts["efa_cards"])
        facts["unverified"] = tuple(facts.get("unverified", ()))
        out[name] = InstanceType(name=name, **facts)
    return out


@lru_cache(maxsize=1)
def all_types() -> Dict[str, InstanceType]:
    return _load()




def get(instance_type: str) -> InstanceType:
    """The entry for `instance_type` (``ml.`` prefix accepted); KeyError when unknown."""
    return all_types()[ec2_type(instance_type)]


def gpu_types() -> List[str]:
    return sorted(n for n, t in all_types().items() if t.is_gpu)


def cpu_types() -> List[str]:
    return sorted(n for n, t in all_types().items() if not t.is_gpu)

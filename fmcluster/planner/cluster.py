"""What the spec buys, from the spec and the catalog alone: the figures `fmcluster plan`
has always printed (GPUs, PFLOPS, HBM, NVLink domains, EFA, NVMe, IPs, the shared stores'
summaries, and the ring all-reduce bound of a gradient of --gradient-gb), kept under
`cluster` in the report."""

from __future__ import annotations

import math
from typing import Any, Dict, List

from fmcluster.planner.collectives import ALL_REDUCE, ring_seconds
from fmcluster.planner.figures import GB
from fmcluster.planner.stores import KIT, stores

FACTS_CHECKED = ("gpu_memory_mib", "bf16_dense_tflops", "efa_interfaces", "nvme_gb")

FORMULAS = {
    "bf16_dense_pflops": "gpus x catalog bf16_dense_tflops / 1000",
    "fp8_dense_pflops": "gpus x catalog fp8_dense_tflops / 1000",
    "hbm_tib": "gpus x gpu_memory_mib / 2^20",
    "nvlink_domains": "ceil(gpus / nvlink_domain_gpus)",
    "efa_gbps_total": "nodes x efa_gbps (EFA groups)",
    "nvme_tb": "nodes x nvme_gb / 1000",
    "allreduce_ms_nvlink_domain": "2(n-1)/n x gradient bytes / (nvlink_gbs_per_gpu / 2), n = GPUs of one domain",
    "allreduce_ms_across_efa": "2(m-1)/m x gradient bytes / (efa_gbps / 8 x nodes per domain), m = domains",
}


def group_figures(g: Any, gradient_bytes: float) -> Dict[str, Any]:
    t = g.instance
    gpus = g.count * t.gpus
    domain = max(t.nvlink_domain_gpus, t.gpus, 1)
    domains = math.ceil(gpus / domain) if gpus else 0
    nvlink_one_way = t.nvlink_gbs_per_gpu / 2 * GB  # catalog NVLink figures are bidirectional
    # without EFA, nodes talk over their one ENA interface (network card 0)
    node_bytes = (t.efa_gbps if g.efa_enabled else t.card_gbps) / 8 * GB
    nodes_per_domain = max(domain // max(t.gpus, 1), 1)
    return {
        "name": g.name, "instance_type": g.instance_type, "role": g.role, "nodes": g.count, "gpus": gpus,
        "gpu": t.gpu or "none",
        "bf16_dense_pflops": round(gpus * t.bf16_dense_tflops / 1000, 2),
        "fp8_dense_pflops": round(gpus * t.fp8_dense_tflops / 1000, 2),
        "hbm_tib": round(gpus * t.gpu_memory_mib / 2**20, 2),
        "nvlink_domain_gpus": domain if gpus else 0,
        "nvlink_domains": domains,
        "efa_interfaces_per_node": t.efa_interfaces if g.efa_enabled else 0,
        "efa_gbps_total": g.count * t.efa_gbps if g.efa_enabled else 0,
        "nvme_tb": round(g.count * (t.nvme_gb or 0) / 1000, 1),
        "ip_addresses": g.ip_addresses,
        "capacity": g.capacity.type,
        "placement": g.placement_strategy,
        "allreduce_ms_nvlink_domain": round(1000 * ring_seconds(ALL_REDUCE, gradient_bytes, min(domain, gpus),
                                                                nvlink_one_way), 2),
        "allreduce_ms_across_efa": round(1000 * ring_seconds(ALL_REDUCE, gradient_bytes, domains,
                                                             node_bytes * nodes_per_domain), 2) if domains > 1 else 0.0,
        "unverified": [f for f in FACTS_CHECKED if not t.is_verified(f)],
    }


def storage_figures(spec: Any) -> Dict[str, Any]:
    """Each summarised store's summary of the spec's section, under its key (null where the spec lacks it)."""
    return {store.spec_key: figures.summary(spec, section, KIT) if section is not None else None
            for store, figures, section in stores(spec) if figures.summarised}


def formulas(spec: Any) -> Dict[str, str]:
    """The figures' formulas, the stores' under their keys."""
    return {**FORMULAS, **{f"{store.spec_key}.{name}": text for store, figures, _ in stores(spec)
                           for name, text in figures.formulas.items()}}


def cluster_figures(spec: Any, gradient_gb: float) -> Dict[str, Any]:
    groups: List[Dict[str, Any]] = [dict(group_figures(g, gradient_gb * GB), placement=spec.placement_of(g))
                                     for g in spec.node_groups]
    total = {
        "nodes": sum(p["nodes"] for p in groups),
        "gpus": sum(p["gpus"] for p in groups),
        "bf16_dense_pflops": round(sum(p["bf16_dense_pflops"] for p in groups), 2),
        "fp8_dense_pflops": round(sum(p["fp8_dense_pflops"] for p in groups), 2),
        "hbm_tib": round(sum(p["hbm_tib"] for p in groups), 2),
        "nvlink_domains": sum(p["nvlink_domains"] for p in groups),
        "efa_gbps_total": sum(p["efa_gbps_total"] for p in groups),
        "nvme_tb": round(sum(p["nvme_tb"] for p in groups), 1),
        "ip_addresses": spec.node_ip_addresses,
        "ip_addresses_with_headroom": spec.required_ips,
    }
    return {"name": spec.name, "region": spec.region, "orchestrator": spec.orchestrator.type,
            "orchestrator_notes": spec.orchestrator_kind.plan_notes(spec),
            "gradient_gb": gradient_gb, "total": total, "groups": groups, "storage": storage_figures(spec),
            "formulas": formulas(spec)}

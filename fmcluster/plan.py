"""Capacity figures a spec buys, from the spec and the catalog alone."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List

from fmcluster.spec import ClusterSpec, NodeGroup

GB = 1e9
SCRATCH_2_MBPS_PER_TIB = 200  # baseline; SCRATCH_2 bursts above it (FSx Lustre performance guide)


@dataclass(frozen=True)
class GroupPlan:
    name: str
    instance_type: str
    nodes: int
    gpus: int
    gpu: str
    bf16_dense_pflops: float
    fp8_dense_pflops: float
    hbm_tib: float
    nvlink_domain_gpus: int
    nvlink_domains: int
    efa_interfaces_per_node: int
    efa_gbps_total: float
    nvme_tb: float
    ip_addresses: int
    allreduce_ms_nvlink_domain: float
    allreduce_ms_across_efa: float
    unverified: List[str]


def ring_allreduce_seconds(size_bytes: float, ranks: int, bytes_per_second: float) -> float:
    """Bandwidth lower bound of ring all-reduce: each rank moves 2(n-1)/n of the data."""
    if ranks <= 1 or bytes_per_second <= 0:
        return 0.0
    return 2 * (ranks - 1) / ranks * size_bytes / bytes_per_second


def plan_group(g: NodeGroup, gradient_bytes: float) -> GroupPlan:
    t = g.instance
    gpus = g.count * t.gpus
    domain = max(t.nvlink_domain_gpus, t.gpus, 1)
    domains = math.ceil(gpus / domain) if gpus else 0
    # NVLink figures are bidirectional; a ring sends and receives at the one-way rate.
    nvlink_one_way = t.nvlink_gbs_per_gpu / 2 * GB
    # Hierarchical all-reduce: within a domain over NVLink, then each domain's share of
    # the gradient crosses EFA; every node's EFA carries 1/gpus_per_node of it per GPU.
    efa_node_bytes = t.efa_gbps / 8 * GB if g.efa_enabled else 0.0
    nodes_per_domain = max(domain // max(t.gpus, 1), 1)
    return GroupPlan(
        name=g.name,
        instance_type=g.instance_type,
        nodes=g.count,
        gpus=gpus,
        gpu=t.gpu or "none",
        bf16_dense_pflops=round(gpus * t.bf16_dense_tflops / 1000, 2),
        fp8_dense_pflops=round(gpus * t.fp8_dense_tflops / 1000, 2),
        hbm_tib=round(gpus * t.gpu_memory_mib / 2**20, 2),
        nvlink_domain_gpus=domain if gpus else 0,
        nvlink_domains=domains,
        efa_interfaces_per_node=t.efa_interfaces if g.efa_enabled else 0,
        efa_gbps_total=g.count * t.efa_gbps if g.efa_enabled else 0,
        nvme_tb=round(g.count * (t.nvme_gb or 0) / 1000, 1),
        ip_addresses=g.ip_addresses,
        allreduce_ms_nvlink_domain=round(1000 * ring_allreduce_seconds(gradient_bytes, min(domain, gpus), nvlink_one_way), 2),
        allreduce_ms_across_efa=round(
            1000 * ring_allreduce_seconds(gradient_bytes, domains, efa_node_bytes * nodes_per_domain), 2
        ),
        unverified=[f for f in ("gpu_memory_mib", "bf16_dense_tflops", "efa_interfaces", "nvme_gb") if not t.is_verified(f)],
    )


def plan(spec: ClusterSpec, gradient_gb: float = 14.0) -> Dict[str, Any]:
    groups = [plan_group(g, gradient_gb * GB) for g in spec.node_groups]
    total = {
        "nodes": sum(p.nodes for p in groups),
        "gpus": sum(p.gpus for p in groups),
        "bf16_dense_pflops": round(sum(p.bf16_dense_pflops for p in groups), 2),
        "fp8_dense_pflops": round(sum(p.fp8_dense_pflops for p in groups), 2),
        "hbm_tib": round(sum(p.hbm_tib for p in groups), 2),
        "nvlink_domains": sum(p.nvlink_domains for p in groups),
        "efa_gbps_total": sum(p.efa_gbps_total for p in groups),
        "nvme_tb": round(sum(p.nvme_tb for p in groups), 1),
        "ip_addresses": spec.node_ip_addresses,
        "ip_addresses_with_headroom": spec.required_ips,
    }
    return {"cluster": spec.name, "gradient_gb": gradient_gb, "total": total, "groups": [asdict(p) for p in groups],
            "storage": plan_storage(spec)}


def plan_storage(spec: ClusterSpec) -> Dict[str, Any]:
    """Shared file system size and its aggregate disk throughput (capacity x throughput per TiB)."""
    fsx = spec.storage.fsx
    if fsx is None:
        return {"fsx": None}
    tib = fsx.storage_capacity_gib / 1024
    per_tib = fsx.throughput or SCRATCH_2_MBPS_PER_TIB
    return {"fsx": {"deployment_type": fsx.deployment_type, "capacity_tib": round(tib, 2),
                    "throughput_mbps_per_tib": per_tib, "throughput_gbps": round(tib * per_tib / 1000, 2),
                    "efa": fsx.efa, "associations": len(fsx.data_repository_associations)}}


def render_text(p: Dict[str, Any]) -> str:
    t = p["total"]
    lines = [
        f"cluster {p['cluster']}: {t['nodes']} nodes, {t['gpus']} GPUs, {t['bf16_dense_pflops']} PFLOPS dense BF16 "
        f"({t['fp8_dense_pflops']} FP8), {t['hbm_tib']} TiB HBM, {t['nvlink_domains']} NVLink domains, "
        f"{t['efa_gbps_total']:g} Gbps EFA, {t['nvme_tb']} TB local NVMe, {t['ip_addresses']} node IPs "
        f"({t['ip_addresses_with_headroom']} with headroom)",
    ]
    for g in p["groups"]:
        lines.append(
            f"  {g['name']}: {g['nodes']} x {g['instance_type']} = {g['gpus']} {g['gpu']}; "
            f"{g['bf16_dense_pflops']} PFLOPS BF16; {g['hbm_tib']} TiB HBM; "
            f"{g['nvlink_domains']} NVLink domain(s) of {g['nvlink_domain_gpus']} GPUs; "
            f"{g['efa_interfaces_per_node']} EFA/node, {g['efa_gbps_total']:g} Gbps EFA in all"
        )
        lines.append(
            f"    ring all-reduce of {p['gradient_gb']:g} GB (bandwidth bound): "
            f"{g['allreduce_ms_nvlink_domain']} ms inside an NVLink domain, "
            f"+{g['allreduce_ms_across_efa']} ms across EFA"
        )
        if g["unverified"]:
            lines.append(f"    unverified catalog facts: {', '.join(g['unverified'])}")
    fsx = p.get("storage", {}).get("fsx")
    if fsx:
        lines.append(
            f"  storage: FSx for Lustre {fsx['deployment_type']} {fsx['capacity_tib']:g} TiB, "
            f"{fsx['throughput_gbps']:g} GB/s aggregate ({fsx['throughput_mbps_per_tib']} MB/s per TiB)"
            f"{', EFA' if fsx['efa'] else ''}, {fsx['associations']} S3 association(s)"
        )
    return "\n".join(lines)

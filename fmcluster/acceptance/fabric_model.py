"""What nccl-tests' bus bandwidth should read on a fabric, from the instance facts and the run's own shape.

nccl-tests reports busbw so that it "reflects how optimally the hardware is used" whatever the rank count
(doc/PERFORMANCE.md): all-reduce algbw x 2(n-1)/n, all-gather, reduce-scatter and all-to-all algbw x (n-1)/n.
On these instances NCCL runs a collective hierarchically: inside each NVLink domain (a node; 72 GPUs of a GB200
UltraServer) over NVLink, across domains over EFA, and it pipelines the two, chunk by chunk, across channels, so the
slower of the two paths sets the time and the faster one hides under it. The planner adds the two phases instead
(a step-time bound: nothing overlaps), which healthy runs beat by half again; that is no pass line.

For a run of n ranks on hosts of g ranks each, in D NVLink domains of k ranks:

- NVLink path (ring reduce-scatter and all-gather inside a domain, each GPU's one-way NVLink rate B):
  busbw = B x (n-1)/n x k/(k-1); all-to-all sends (k-1)/n of its buffer inside: busbw = B x (n-1)/(k-1).
- EFA path: the domain's EFA rate E (the node's EFA, shared by the node's GPUs, of which the run uses g) carries
  2(D-1)/D of the buffer for all-reduce, (D-1)/D for all-gather and reduce-scatter, so busbw = E x (n-1)/n /
  ((D-1)/D); all-to-all sends (n-k)/n of each rank's buffer through its share E/k: busbw = E/k x (n-1)/(n-k).

The expected busbw is the lower of the two paths, each at its measured efficiency: NCCL reaches about 80 % of the
EFA line rate and the whole of the NVLink ring rate (`EFFICIENCY`, calibrated on every published run in
`CALIBRATION`; tests/acceptance/test_fabric_model.py holds each within `ERROR_BAND`). The physical limit is what no
algorithm can beat: each path at line rate, and for all-reduce NVLink with in-switch reduction (NVLS: a GPU must
still send its whole buffer once, so busbw <= 2(n-1)/n x B). A result above it is not a measurement of this fabric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple

GB = 1e9  # nccl-tests' GB/s are 10^9 bytes per second

# Reached share of each path's line rate, calibrated on CALIBRATION (the EFA path's runs read 0.79-0.88 of it, the
# NVLink-bound run 1.01): docs/observability.md, "Fabric acceptance".
EFFICIENCY = {"efa": 0.8, "nvlink": 1.0}
ERROR_BAND = (0.85, 1.15)  # every published run's peak busbw / the model's expected value lies inside this band


@dataclass(frozen=True)
class Fabric:
    """The facts the model needs, per instance type (fmcluster/runtime/catalog.json)."""

    gpus: int  # per node
    nvlink_gbs_one_way: float  # per GPU; 0 without NVLink
    efa_gbs: float  # per node (Gbps / 8)
    domain_gpus: int  # GPUs in one NVLink domain: a node, or 72 on a GB200 UltraServer

    @classmethod
    def of(cls, instance: Any) -> Fabric:
        """From a catalog InstanceType (NVLink is listed both ways per GPU, EFA in Gbps per node)."""
        gpus = int(instance.gpus)
        return cls(gpus, float(instance.nvlink_gbs_per_gpu) / 2, float(instance.efa_gbps) / 8,
                   max(int(instance.nvlink_domain_gpus), gpus, 1))


@dataclass(frozen=True)
class Expectation:
    expected_gbs: float
    limit_gbs: float
    nvlink_gbs: Optional[float]  # the NVLink path's busbw at line rate (None: one rank per domain)
    efa_gbs: Optional[float]  # the EFA path's busbw at line rate (None: one domain)
    bound_by: str  # "NVLink" or "EFA"
    domains: int
    ranks_per_domain: int
    formula: str


def _domains(fabric: Fabric, hosts: int, ranks_per_host: int) -> Tuple[int, int, int]:
    """(domains, ranks per domain, hosts per domain). Hosts of one UltraServer share its NVLink domain; the run's
    hosts are taken to fill whole domains in order (a log does not say which UltraServer a host is in)."""
    hosts_per_domain = max(1, fabric.domain_gpus // max(fabric.gpus, 1)) if fabric.nvlink_gbs_one_way else 1
    domains = math.ceil(hosts / hosts_per_domain)
    per_domain = min(hosts, hosts_per_domain)
    return domains, per_domain * ranks_per_host, per_domain


def expect(fabric: Fabric, collective: str, hosts: int, ranks_per_host: int) -> Expectation:
    """The expected busbw and the physical limit of `collective` on `hosts` hosts running `ranks_per_host` ranks each."""
    n = hosts * ranks_per_host
    if n < 2:
        raise ValueError("a collective needs at least 2 ranks")
    domains, k, hosts_in_domain = _domains(fabric, hosts, ranks_per_host)
    nvl_rate = fabric.nvlink_gbs_one_way
    # the run uses its share of each node's EFA: NCCL drives the NICs nearest the GPUs it runs on
    efa_rate = fabric.efa_gbs * hosts_in_domain * min(1.0, ranks_per_host / max(fabric.gpus, 1))
    nvlink: Optional[float] = None
    efa: Optional[float] = None
    nvl_limit: Optional[float] = None
    if k > 1 and nvl_rate > 0:
        if collective == "alltoall":
            nvlink = nvl_rate * (n - 1) / (k - 1)
            nvl_limit = nvlink
        else:
            nvlink = nvl_rate * (n - 1) / n * k / (k - 1)
            nvl_limit = 2 * (n - 1) / n * nvl_rate if collective == "all_reduce" else nvlink
    if domains > 1:
        if collective == "alltoall":
            efa = efa_rate / k * (n - 1) / (n - k)
        else:
            efa = efa_rate * (n - 1) / n / ((domains - 1) / domains)
    paths = [(EFFICIENCY["nvlink"] * nvlink, "NVLink") if nvlink else None,
             (EFFICIENCY["efa"] * efa, "EFA") if efa else None]
    found = [p for p in paths if p is not None]
    if not found:
        raise ValueError("no NVLink between the ranks and a single host: nothing to model")
    expected, bound_by = min(found)
    limit = min(x for x in (nvl_limit, efa) if x is not None)
    formula = (f"min(NVLink {nvlink:.0f} GB/s" if nvlink else "min(-") + \
              (f", EFA {efa:.0f} GB/s" if efa else ", -") + \
              f") at {EFFICIENCY['nvlink']:.0%}/{EFFICIENCY['efa']:.0%} of line rate; " \
              f"{domains} NVLink domain(s) of {k} rank(s)"
    return Expectation(expected, limit, nvlink, efa, bound_by, domains, k, formula)

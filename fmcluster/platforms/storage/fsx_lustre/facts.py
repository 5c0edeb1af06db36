# ruff: noqa: E501  (sources are quoted whole)
"""What the planner prices and times the file system with (figures.py), each with its source: its throughput per TiB
(`RATES`) and its price entry (`PRICE`, as the planner's price data states one, docs/planning.md, Cost)."""

from __future__ import annotations

from typing import Any, Dict

RATES: Dict[str, Any] = {
    "scratch_2_baseline_mbps_per_tib": 200,
    "scratch_2_burst_mbps_per_tib": 1300,
    "persistent_2_mbps_per_tib": [125, 250, 500, 1000],
    "sources": [
        "Amazon FSx for Lustre User Guide, 'Amazon FSx for Lustre performance': aggregate throughput = storage capacity x throughput per unit of storage; SCRATCH_2 200 MB/s/TiB baseline with bursts up to 1,300 MB/s/TiB; PERSISTENT_2 125, 250, 500 or 1,000 MB/s/TiB"
    ],
    "s3_assumption": "Data repository associations move data between S3 and the file system through the file servers, so an export (auto-export of new checkpoint files) or a lazy import (restore) runs no faster than the file system's throughput. Assumption, stated in the FSx user guide only qualitatively; S3 itself scales per prefix.",
}
CLIENT_NETWORK: Dict[str, Any] = {
    "assumption": "A Lustre client without EFA talks to FSx over its one ENA interface on network card 0: the planner bounds it by network_gbps / network_cards of the catalog entry. With EFA-enabled FSx (and EFA on the group) it bounds it by the node's EFA bandwidth. Both generous: they keep the time a lower bound.",
    "unverified": True,
}
PRICE: Dict[str, Any] = {
    "item": "FSx for Lustre storage",
    "per": "GiB-month of storage capacity",
    "regional": True,
    "status": "unpriced",
    "source": "aws.amazon.com/fsx/lustre/pricing/ bills SSD storage per GB-month by deployment type and throughput per TiB; no AWS figure in this data",
    "usage": "backups per GB-month stored; provisioned metadata IOPS beyond what the capacity includes",
    "searched": "AWS's page not found in the research corpora on 2026-12-03 (docs/planning.md, 'Prices not found')",
}

# ruff: noqa: E501  (sources are quoted whole)
"""What the planner prices and times Mountpoint for Amazon S3 with (figures.py), each with its source: S3's request
rates and Mountpoint's part size (`RATES`), and S3's storage and request prices (`PRICES`, the status of each as
in the planner's price data, docs/planning.md, Cost)."""

from __future__ import annotations

from typing import Any, Dict

RATES: Dict[str, Any] = {
    "_about": "Request rates of S3 and Mountpoint's part size: a shard written or read through Mountpoint moves in parts, one request each, so S3's request rate times the part size caps the bytes per second one prefix (general purpose) or one directory bucket (S3 Express One Zone) takes. Read 2026-12-04.",
    "general_purpose": {
        "put_per_s_per_prefix": 3500,
        "get_per_s_per_prefix": 5500,
        "bound": "a floor: S3 scales to at least these rates per partitioned prefix, and partitions a busy prefix further over time; a time computed from them is what one unpartitioned prefix gives, not a bound",
        "sources": [
            "Amazon S3 User Guide, 'Best practices design patterns: optimizing Amazon S3 performance' (https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html): at least 3,500 PUT/COPY/POST/DELETE or 5,500 GET/HEAD requests per second per partitioned prefix",
            "AWS Knowledge Center, 's3-object-key-naming-pattern' (https://aws.amazon.com/premiumsupport/knowledge-center/s3-object-key-naming-pattern/): the rates are per partitioned prefix",
        ],
    },
    "express_one_zone": {
        "requests_per_s_per_bucket": 200000,
        "unverified": True,
        "bound": "AWS documents 'hundreds of thousands of requests per second' per directory bucket without a figure; the planner takes 200,000 (the least that phrase reads as) for writes and reads alike, so a time from it is generous to writes only if S3 gives fewer",
        "assumption": "Third-party pages quote 200,000 PUT and 2,000,000 GET per second per directory bucket; not found on an AWS page here, so reads are not credited with more than writes",
        "sources": [
            "Amazon S3 User Guide, 'How is S3 Express One Zone different?' (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-differences.html): directory buckets support hundreds of thousands of requests per second",
            "Amazon S3 User Guide, 'Working with directory buckets': no prefix limits for directory buckets, directories scale horizontally",
        ],
    },
    "mountpoint": {
        "part_size_bytes": 8306688,
        "node_throughput": "Mountpoint targets the instance's available network bandwidth by default (--maximum-throughput-gbps); the planner bounds a node by network_gbps / network_cards of its catalog entry (one ENA interface), as for a file system client without EFA: generous, so the network-limited time stays a lower bound",
        "unverified": True,
        "sources": [
            "awslabs/mountpoint-s3 doc/CONFIGURATION.md (commit 58817cab2fc3020a422d8aa14049a86b296f4498): default --read-part-size and --write-part-size 8 MiB (8,306,688 bytes as the document states it); maximum network throughput defaults to the instance's available network bandwidth",
            "awslabs/mountpoint-s3 doc/SEMANTICS.md: new files written sequentially by one writer; rename only on S3 Express One Zone; no directory rename",
        ],
    },
}
PRICES: Dict[str, Any] = {
    "_about": "S3 billed by use, for the checkpoints and datasets on a Mountpoint store: storage per GB-month (AWS bills S3 GB as 2^30 bytes: the FAQ's worked example divides KB by 1,048,576), requests per 1,000, and S3 Express One Zone's per-GB upload and retrieval charges. us-east-1 figures; another Region gets them as estimates. 'status' as in services: 'quoted' (an AWS page's sentence, 'row'), 'unverified' (as third-party pages quote AWS's pricing page).",
    "as_of": "2026-12-04",
    "standard": {
        "item": "S3 Standard",
        "region": "us-east-1",
        "usd_per_gb_month": 0.023,
        "usd_per_1000_put": 0.005,
        "usd_per_1000_get": 0.0004,
        "usd_per_gb_upload": 0.0,
        "usd_per_gb_retrieval": 0.0,
        "status": "unverified",
        "source": "aws.amazon.com/s3/pricing/ (S3 Standard, first 50 TB per month; PUT, COPY, POST, LIST and GET requests per 1,000), the figures as third-party pages quote it (e.g. devnotes.tech, 'Understanding AWS S3 Pricing'); not checked against the AmazonS3 Price List offer here",
        "searched": "AWS's pricing page not found in the research corpora on 2026-12-04 (docs/planning.md, 'Prices not found')",
    },
    "express_one_zone": {
        "item": "S3 Express One Zone",
        "region": "us-east-1",
        "usd_per_gb_month": 0.11,
        "usd_per_1000_put": 0.00113,
        "usd_per_1000_get": 3e-05,
        "usd_per_gb_upload": 0.0032,
        "usd_per_gb_retrieval": 0.0006,
        "status": "quoted",
        "source": "Amazon S3 FAQs, S3 Express One Zone billing, Example 1 (US East (N. Virginia)): storage per GB-month, PUT and GET per 1,000 requests, per-GB data upload and retrieval",
        "page": "https://aws.amazon.com/s3/faqs/",
        "read": "2026-12-04",
        "rows": {
            "usd_per_gb_month": "Total Storage cost = 10 GB-Month x $0.11 = $1.10",
            "usd_per_1000_put": "1,000,000 PUT Requests: 1,000,000 requests x $0.00113/1,000 = $1.13",
            "usd_per_1000_get": "9,000,000 GET Requests: 9,000,000 requests x $0.00003/1,000 = $0.27",
            "usd_per_gb_upload": "Data upload charge: 10 KB / 1,048,576 x 1,000,000 x $0.0032 = $0.03",
            "usd_per_gb_retrieval": "Data retrieval charge: 10 KB / 1,048,576 x 9,000,000 x $0.0006 = $0.05",
        },
        "copy_read": "the research tool's stored copy of the FAQ page (through a text proxy, txtdot); the rows are its sentences",
    },
}

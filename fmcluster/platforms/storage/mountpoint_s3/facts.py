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
        "put_per_s_per_bucket": 100000,
        "get_per_s_per_bucket": 200000,
        "bound": "the default quota of a directory bucket (AWS Support raises it to 200,000 writes and 2,000,000 reads per second): a time computed from it is what the default gives",
        "sources": [
            "Amazon S3 User Guide, 'Performance guidelines and design patterns' for S3 Express One Zone (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-performance.html): 'By default, each directory bucket supports up to 200,000 reads and up to 100,000 writes per second'; up to 2 million reads and 200,000 writes per second on request",
            "Amazon S3 User Guide, 'Working with directory buckets': no prefix limits for directory buckets, directories scale horizontally",
        ],
    },
    "mountpoint": {
        "part_size_bytes": 8306688,
        "write_bytes_per_s_per_file": 1008 * 2**20,
        "read_bytes_per_s_per_handle": 1417 * 2**20,
        "per_file": "One file handle moves at most these (sequential, buffered, large files): Mountpoint's throughput on one file is bound by CPU, not the network, so a node moves at most (files open at once) x these, or its network, whichever is less. Medians of Mountpoint's own CI benchmark (the fits in CALIBRATION); more than 4 handles on one node not measured there (unverified), and a benchmark of 16 MiB parts read as the 8 MiB default's",
        "node_throughput": "Mountpoint targets the instance's available network bandwidth by default (--maximum-throughput-gbps); the planner bounds a node's network by network_gbps / network_cards of its catalog entry (one ENA interface on card 0: 100 Gbps on p5.48xlarge, of which EFA and IP share 3,200 Gbps and IP may use up to 800 Gbps with more ENA interfaces)",
        "sources": [
            "awslabs/mountpoint-s3 doc/CONFIGURATION.md (commit 58817cab2fc3020a422d8aa14049a86b296f4498): default --read-part-size and --write-part-size 8 MiB (8,306,688 bytes as the document states it); maximum network throughput defaults to the instance's available network bandwidth",
            "awslabs/mountpoint-s3 doc/TROUBLESHOOTING.md, 'Slower throughput than expected': 'reading from a single file sequentially will be bounded by CPU performance rather than the available network throughput'",
            "awslabs/mountpoint-s3 doc/BENCHMARKING.md and its CI results (https://awslabs.github.io/mountpoint-s3/dev/bench/): m5dn.24xlarge (100 Gbps), us-east-1, fio sync 256 KiB blocks on a 100 GiB file, --part-size 16 MiB; medians of the 30 main-branch runs of 2026-06-24 to 2026-08-22: sequential_read 1,417 MiB/s, sequential_write 1,008 MiB/s",
            "Amazon EC2 User Guide, EFA for P5 and P5e (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html): 3,200 Gbps in all, up to 800 Gbps of it for IP traffic; one ENA interface on card 0 gives up to 100 Gbps of IP bandwidth",
            "Amazon EC2 User Guide, instance network bandwidth (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth.html): traffic within the Region can use the instance's full network bandwidth",
            "awslabs/mountpoint-s3 doc/SEMANTICS.md: new files written sequentially by one writer; rename only on S3 Express One Zone; no directory rename",
        ],
    },
}
# Published single-node runs of Mountpoint the per-file rates are fitted on ("fit") or held against ("held"): node
# network (Gbps), files open at once, "read"/"write", the measured MiB/s. Medians of Mountpoint's CI benchmark (30
# main-branch runs, 2026-06/08, https://awslabs.github.io/mountpoint-s3/dev/bench/ and .../dev/s3-express/bench/,
# m5dn.24xlarge, 100 GiB file, 256 KiB sync I/O, buffered). No multi-node run with its size, node count and time was
# found published (docs/planning.md): the request term and the node count are not calibrated.
CALIBRATION = (
    {"run": "sequential_read, S3 Standard", "gbps": 100, "handles": 1, "verb": "read", "mib_s": 1417, "use": "fit"},
    {"run": "sequential_write, S3 Standard", "gbps": 100, "handles": 1, "verb": "write", "mib_s": 1008, "use": "fit"},
    {"run": "sequential_read_four_threads, S3 Standard", "gbps": 100, "handles": 4, "verb": "read", "mib_s": 4965,
     "use": "held"},
    {"run": "sequential_read, S3 Express One Zone", "gbps": 100, "handles": 1, "verb": "read", "mib_s": 1566,
     "use": "held"},
    {"run": "sequential_read_four_threads, S3 Express One Zone", "gbps": 100, "handles": 4, "verb": "read",
     "mib_s": 5325, "use": "held"},
    {"run": "sequential_write, S3 Express One Zone", "gbps": 100, "handles": 1, "verb": "write", "mib_s": 1010,
     "use": "held"},
)
# The held runs' error band: the prediction within this share of the measurement, either way.
BAND = 0.2
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

"""Write the node collector's configuration: Prometheus in agent mode scraping this node's exporters and
remote-writing to Amazon Managed Service for Prometheus with SigV4 (the instance role signs).

    python3 -m fmcluster.runtime.observability.collector_config --cluster NAME --region us-east-1 \\
        --remote-write-url https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-…/api/v1/remote_write \\
        [--scrape-interval 30] [--node-group gpu] [--dcgm auto|yes|no] [--root DIR] --out /etc/fmcluster/agent.yml

Every series gets the labels the rules and dashboards group by: ``cluster`` (external label), ``node``
(host name), ``instance_id`` and ``instance_type`` (from DMI, like the validator) and ``node_group``.
Prometheus reads YAML; the file is written as JSON, which is YAML, so no YAML library is needed.
Exit 0 written, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
from typing import Any, Dict, List, Optional

from fmcluster.runtime.observability import AGENT_PORT, DCGM_EXPORTER_PORT, NODE_EXPORTER_PORT, RAY_METRICS_PORT
from fmcluster.runtime.rooted import read_text

REMOTE_WRITE_URL = re.compile(r"^https://aps-workspaces\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/workspaces/ws-[0-9a-f-]+/"
                              r"api/v1/remote_write$")
REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$")
LABEL_VALUE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")

# Amazon Managed Service for Prometheus' recommended remote-write queue settings.
QUEUE_CONFIG = {"capacity": 2500, "max_shards": 200, "max_samples_per_send": 1000}


def _read(root: str, path: str) -> Optional[str]:
    try:
        return read_text(root, path).strip() or None
    except OSError:
        return None


def node_identity(root: str = "/") -> Dict[str, str]:
    """Host name, instance id and type from DMI (no IMDS call: works before the network is up)."""
    ident = {"node": socket.gethostname().split(".")[0]}
    instance_id = _read(root, "/sys/devices/virtual/dmi/id/board_asset_tag")
    instance_type = _read(root, "/sys/devices/virtual/dmi/id/product_name")
    if instance_id and instance_id.startswith("i-"):
        ident["instance_id"] = instance_id
    if instance_type and LABEL_VALUE.match(instance_type):
        ident["instance_type"] = instance_type
    return ident


def has_gpus(root: str = "/") -> bool:
    return os.path.exists(os.path.join(root, "dev/nvidia0"))


def build_config(
    *,
    cluster: str,
    region: str,
    remote_write_url: str,
    scrape_interval_s: int = 30,
    target_labels: Dict[str, str],
    dcgm: bool,
) -> Dict[str, Any]:
    interval = f"{int(scrape_interval_s)}s"
    timeout = f"{max(5, min(int(scrape_interval_s) - 5, 20))}s"

    def job(name: str, port: int, **extra: Any) -> Dict[str, Any]:
        return {
            "job_name": name,
            "scrape_interval": interval,
            "scrape_timeout": timeout,
            "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": dict(target_labels)}],
            **extra,
        }

    jobs: List[Dict[str, Any]] = [
        # honor_labels: the validator's textfile already carries instance_type; keep it as written
        job("node", NODE_EXPORTER_PORT, honor_labels=True),
        job("collector", AGENT_PORT),
    ]
    if dcgm:
        jobs.insert(1, job("dcgm", DCGM_EXPORTER_PORT))
        # Ray's metrics agent on GPU nodes, up only while a Ray job runs there (docs/post-training.md, "Telemetry")
        jobs.append(job("ray", RAY_METRICS_PORT))
    return {
        "global": {"scrape_interval": interval, "scrape_timeout": timeout, "external_labels": {"cluster": cluster}},
        "scrape_configs": jobs,
        "remote_write": [
            {
                "url": remote_write_url,
                "sigv4": {"region": region},
                "queue_config": dict(QUEUE_CONFIG),
            }
        ],
    }


def render(config: Dict[str, Any]) -> str:
    return json.dumps(config, indent=2, sort_keys=False) + "\n"


def _problems(args: argparse.Namespace) -> List[str]:
    found = []
    if not LABEL_VALUE.match(args.cluster):
        found.append(f"--cluster: {args.cluster!r} is not a label value (letters, digits, . _ -)")
    if not REGION.match(args.region):
        found.append(f"--region: {args.region!r} is not an AWS region (e.g. us-east-1)")
    if not REMOTE_WRITE_URL.match(args.remote_write_url):
        found.append("--remote-write-url: expected https://aps-workspaces.REGION.amazonaws.com/workspaces/ws-…"
                     "/api/v1/remote_write")
    elif f".{args.region}." not in args.remote_write_url:
        found.append(f"--remote-write-url: the workspace is not in --region {args.region}")
    if not 10 <= args.scrape_interval <= 300:
        found.append("--scrape-interval: 10 to 300 seconds")
    if args.node_group and not LABEL_VALUE.match(args.node_group):
        found.append(f"--node-group: {args.node_group!r} is not a label value")
    return found


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="collector_config", description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--region", required=True)
    ap.add_argument("--remote-write-url", required=True)
    ap.add_argument("--scrape-interval", type=int, default=30)
    ap.add_argument("--node-group", default="")
    ap.add_argument("--dcgm", choices=("auto", "yes", "no"), default="auto")
    ap.add_argument("--root", default="/", help="prefix for /sys and /dev reads (tests)")
    ap.add_argument("--out", required=True, help="file to write ('-' for stdout)")
    args = ap.parse_args(argv)
    problems = _problems(args)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        return 2
    labels = node_identity(args.root)
    if args.node_group:
        labels["node_group"] = args.node_group
    dcgm = has_gpus(args.root) if args.dcgm == "auto" else args.dcgm == "yes"
    text = render(
        build_config(
            cluster=args.cluster,
            region=args.region,
            remote_write_url=args.remote_write_url,
            scrape_interval_s=args.scrape_interval,
            target_labels=labels,
            dcgm=dcgm,
        )
    )
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    tmp = f"{args.out}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

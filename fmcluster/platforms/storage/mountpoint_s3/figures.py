"""What `fmcluster plan` says of Mountpoint for Amazon S3 (`FIGURES`): checkpoint write and restore, dataset
streaming, and what its checkpoints cost a month, on S3 Standard and S3 Express One Zone; as a comparison where the
spec has a shared file system and no section of this store.

Every rank writes (or reads) its shard at once through Mountpoint, which moves files in parts of one request each and
one file at a rate bound by CPU. So a checkpoint takes ``size / min(nodes x min(node network, files per node x
per-file rate), request rate x part size)``: the per-file rate is Mountpoint's measured one (fitted and held on
published single-node runs, facts.CALIBRATION), the network term one ENA interface; the request term is S3's
documented floor for one partitioned prefix (general purpose buckets, which partition a busy prefix further over
time) or a directory bucket's default quota (S3 Express One Zone). Rates and prices in facts.py, with sources.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from fmcluster.platforms.storage import StoreFigures
from fmcluster.platforms.storage.mountpoint_s3.facts import PRICES, RATES
from fmcluster.platforms.storage.mountpoint_s3.settings import MountpointS3

TIER = str(MountpointS3.checkpoint_tier)  # the tier its section offers; the plan files its figures under it
COST = f"{TIER}_cost"
COST_KEYS = ("keep", "interval_minutes", "assumed", "classes")  # the rest: other stores' words on their billing
GIB = 2**30
HOURS_PER_MONTH = 730


def express(section: Optional[Any]) -> bool:
    """The section mounts an S3 Express One Zone directory bucket."""
    return section is not None and getattr(section, "express", None) is not None


PER_FILE = {"PUT": "write_bytes_per_s_per_file", "GET": "read_bytes_per_s_per_handle"}


def node_bytes_per_s(network_bytes_per_s: float, files: int, verb: str) -> float:
    """What one node moves through Mountpoint with `files` open at once (PUT: writing, GET: reading): each at most
    Mountpoint's per-file rate, all together at most the node's network."""
    return min(network_bytes_per_s, files * RATES["mountpoint"][PER_FILE[verb]])


def _node(group: Any, kit: Any) -> Tuple[float, int]:
    """(a node's network toward S3, the files it has open at once): Mountpoint speaks TCP over one ENA interface
    (network card 0), never EFA; every rank (GPU) writes or reads its own shard file."""
    t = group.instance
    return t.card_gbps / 8 * kit.GB, max(t.gpus, 1)


def client_bytes_per_s(group: Any, kit: Any, verb: str = "GET") -> float:
    network, files = _node(group, kit)
    return group.count * node_bytes_per_s(network, files, verb)


def _rates(express: bool) -> Tuple[float, float, str]:
    """(PUT/s, GET/s, what they are per) for the bucket type."""
    if express:
        ez = RATES["express_one_zone"]
        return ez["put_per_s_per_bucket"], ez["get_per_s_per_bucket"], "directory bucket (S3 Express One Zone's default)"
    gp = RATES["general_purpose"]
    return gp["put_per_s_per_prefix"], gp["get_per_s_per_prefix"], "partitioned prefix (S3's documented floor)"


def _transfer(size: float, group: Any, requests_per_s: float, part: float, verb: str, per: str,
              kit: Any) -> Dict[str, Any]:
    network, files = _node(group, kit)
    clients = group.count * node_bytes_per_s(network, files, verb)
    by_requests = requests_per_s * part
    rate = min(clients, by_requests)
    if clients > by_requests:
        limited, bound = f"S3 {verb} requests per {per}", "at S3's documented rate, not a bound (S3 may scale past it)"
    elif clients < group.count * network:
        limited = f"Mountpoint's per-file rate ({files} files per node)"
        bound = "at Mountpoint's measured per-file rate (calibrated on one node; docs/planning.md)"
    else:
        limited, bound = "client network", "lower bound (the node network is taken generously)"
    return {"figure": kit.fig(size / rate, "s", f"size / min(nodes x min(node network, files per node x per-file "
                              f"rate), {verb} requests/s x part size)", size=size, client_bytes_per_s=clients,
                              node_network_bytes_per_s=network, files_per_node=files,
                              per_file_bytes_per_s=RATES["mountpoint"][PER_FILE[verb]],
                              requests_per_s=requests_per_s, part_bytes=part),
            "limited_by": limited, "bound": bound}


def target(size: float, group: Any, kit: Any, express: bool = False, configured: bool = True,
           key: str = "mountpoint_s3") -> Dict[str, Any]:
    """Writing every shard to, and reading it back from, the store through Mountpoint (`configured`: the spec's
    store, else S3 Standard as a comparison)."""
    part = RATES["mountpoint"]["part_size_bytes"]
    put, get, per = _rates(express)
    write = _transfer(size, group, put, part, "PUT", per, kit)
    read = _transfer(size, group, get, part, "GET", per, kit)
    name = "S3 Express One Zone (Mountpoint)" if express else "S3 (Mountpoint)"
    return {
        "target": name, "store_tier": TIER, "available": True, "write": write["figure"], "restore": read["figure"],
        "limited_by": write["limited_by"], "write_bound": write["bound"], "restore_bound": read["bound"],
        "restore_limited_by": read["limited_by"], "durable": True,
        # calibrated on one node only: no published multi-node run (facts.CALIBRATION)
        "unverified": True,
        "note": ("one AZ's durability (S3 Express One Zone)" if express else "durable in S3 once each file is closed")
        + ("" if configured else f"; a comparison: the spec has no writable storage.{key}"),
    }


def stream(step_bytes_per_s: float, group: Any, express: bool, kit: Any) -> Dict[str, Any]:
    """What the store delivers to the input pipeline (a reader per rank), against what the step needs."""
    _, get, per = _rates(express)
    part = RATES["mountpoint"]["part_size_bytes"]
    read = _transfer(1.0, group, get, part, "GET", per, kit)
    clients = read["figure"]["inputs"]["client_bytes_per_s"]
    rate = min(clients, get * part)
    return {"delivers_bytes_per_s": kit.fig(rate, "bytes/s", "min(nodes x min(node network, readers per node x "
                                            "per-reader rate), GET requests/s x part size)",
                                            client_bytes_per_s=clients, requests_per_s=get, part_bytes=part),
            "limited_by": read["limited_by"], "bound": read["bound"].replace("lower bound", "upper bound on rate"),
            "share": step_bytes_per_s / rate if rate else float("inf"), "delivers": step_bytes_per_s <= rate,
            "express": express}


def monthly_cost(size: float, keep: int, interval_minutes: int, region: str, kit: Any) -> List[Dict[str, Any]]:
    """What `keep` checkpoints stored and one written every `interval_minutes` cost a month, per storage class."""
    part = RATES["mountpoint"]["part_size_bytes"]
    stored_gb, written_gb = keep * size / GIB, size / GIB
    per_month = HOURS_PER_MONTH * 60 / interval_minutes
    puts = -(-size // part)  # at least one part per part size; more with many small shards (a lower bound)
    out: List[Dict[str, Any]] = []
    for key in ("standard", "express_one_zone"):
        p = PRICES[key]
        storage = stored_gb * p["usd_per_gb_month"]
        requests = per_month * puts * p["usd_per_1000_put"] / 1000
        upload = per_month * written_gb * p["usd_per_gb_upload"]
        total = storage + requests + upload
        notes = [] if region == p["region"] else [f"estimate: {region} not in the data, {p['region']} price"]
        if p["status"] == "unverified":
            notes.append("figures not checked against an AWS page or the Price List (docs/planning.md, Cost)")
        out.append({
            "class": p["item"], "status": p["status"], "source": p.get("page", p["source"]), "notes": notes,
            "usd_per_month": kit.fig(total, "USD/month", "stored GB x USD/GB-month + checkpoints a month x (PUTs x USD "
                                     "per PUT + GB x USD per GB uploaded)", stored_gb=stored_gb, written_gb=written_gb,
                                     checkpoints_per_month=per_month, puts_per_checkpoint=puts,
                                     usd_per_gb_month=p["usd_per_gb_month"], usd_per_1000_put=p["usd_per_1000_put"],
                                     usd_per_gb_upload=p["usd_per_gb_upload"]),
            "storage_usd": storage, "requests_usd": requests, "upload_usd": upload,
            "restore_usd": kit.fig(puts * p["usd_per_1000_get"] / 1000 + written_gb * p["usd_per_gb_retrieval"], "USD",
                                   "GETs x USD per GET + GB x USD per GB retrieved (one restore)"),
        })
    return out


class Figures(StoreFigures):
    def __init__(self, key: str) -> None:
        self.key = key  # its section's key under the spec's storage

    def checkpoint_targets(self, spec: Any, section: Any, size: float, group: Any, steps: Any,
                           kit: Any) -> List[Dict[str, Any]]:
        # the spec's store (writable or not), or S3 Standard as a comparison beside a shared file system
        if section is None and spec.storage.file_system() is None:
            return []
        t = target(size, group, kit, express(section), configured=section is not None, key=self.key)
        t["comparison"] = section is None or bool(section.checkpoint_problems())
        if section is not None and t["comparison"]:
            t["note"] += f"; a comparison: storage.{self.key} is read-only and takes no checkpoints"
        t["write_steps"] = steps(kit.val(t["write"]))
        return [t]

    def checkpoint_cost(self, spec: Any, section: Any, size: float, keep: int, interval_minutes: int,
                        kit: Any) -> List[Dict[str, Any]]:
        return monthly_cost(size, keep, interval_minutes, spec.region, kit)

    def checkpoint_cost_lines(self, checkpoint: Mapping[str, Any], kit: Any) -> List[str]:
        cost = checkpoint.get(COST)
        if cost is None:
            return []
        how = f"keep {cost['keep']}, one every {cost['interval_minutes']} min" + (
            " (assumed: no checkpoints section)" if cost["assumed"] else "")
        lines = [f"  checkpoints on S3 a month ({how}):"]
        for c in cost["classes"]:
            notes = "; ".join([f"status {c['status']}", *c["notes"]])
            lines.append(f"    {c['class']}: {kit.money(kit.val(c['usd_per_month']))} (storage "
                         f"{kit.money(c['storage_usd'])}, requests {kit.money(c['requests_usd'])}, upload "
                         f"{kit.money(c['upload_usd'])}); a restore {kit.money(kit.val(c['restore_usd']))} [{notes}]")
        return lines + [f"    {words}" for key, words in cost.items() if key not in COST_KEYS and words]

    def stream_lines(self, data_path: Mapping[str, Any], kit: Any) -> List[str]:
        s3 = data_path.get(TIER)
        if not s3:
            return []
        where = ("S3 Express One Zone" if s3["express"] else "S3") + (" (comparison)" if s3.get("comparison") else "")
        verdict = "it delivers it" if s3["delivers"] else "MORE than it delivers"
        return [f"data from {where} through Mountpoint: {kit.percent(s3['share'])} of "
                f"{kit.human_bytes(kit.val(s3['delivers_bytes_per_s']))}/s (limited by {s3['limited_by']}; "
                f"{s3['bound']}): {verdict}"]

    def stream(self, spec: Any, section: Any, bytes_per_s: float, group: Any, kit: Any) -> Dict[str, Any]:
        if section is None and spec.storage.file_system() is None:
            return {}
        out = stream(bytes_per_s, group, express(section), kit)
        out["comparison"] = section is None
        return {TIER: out}

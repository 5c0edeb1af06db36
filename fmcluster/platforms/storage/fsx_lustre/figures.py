"""What `fmcluster plan` and `fmcluster diagram` say of FSx for Lustre (`Figures`): what the section buys (capacity,
aggregate throughput, its S3 associations), its cost line, checkpoint write and restore on it and through its data
repository associations to S3, whether checkpoints fit, what it delivers to the input pipeline, and its node in the
diagram.

Every GPU writes its own shard at once, so a checkpoint takes size / min(what the writers push, what the file system
takes): capacity x throughput per TiB (FSx performance guide; facts.py). Data repository associations move data to and
from S3 through the file servers: the export reads what the write put there, both against the same throughput, so S3
holds a checkpoint no sooner than max(size / rate, 2 x size / throughput) after the write starts; a restore from S3
imports then reads, the same bound. The rates are unverified and generous: every time stays a lower bound.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from fmcluster.platforms.storage import StoreFigures
from fmcluster.platforms.storage.fsx_lustre.facts import PRICE, RATES
from fmcluster.platforms.storage.fsx_lustre.settings import Fsx, association_bucket, association_s3_path

MB = 1e6
SCRATCH_2_MBPS_PER_TIB = RATES["scratch_2_baseline_mbps_per_tib"]  # baseline; SCRATCH_2 bursts above it
TARGET = Fsx.title
EXPORT_TARGET = "S3 (data repository association)"
COLOR = "#bbdefb"


def per_tib(fsx: Fsx) -> int:
    return fsx.throughput or SCRATCH_2_MBPS_PER_TIB


def bytes_per_s(fsx: Fsx) -> float:
    return fsx.storage_capacity_gib / 1024 * per_tib(fsx) * MB


def client_bytes_per_s(group: Any, efa: bool, kit: Any) -> float:
    """A Lustre client without EFA talks over its one ENA interface (network card 0); with EFA, the node's EFA."""
    t = group.instance
    per_node_gbps = t.efa_gbps if efa and group.efa_enabled else t.card_gbps
    return group.count * per_node_gbps / 8 * kit.GB


class Figures(StoreFigures):
    summarised = True
    unbilled = ("FSx backups",)
    short = "FSx"
    target, export_target = TARGET, EXPORT_TARGET
    formulas = {"throughput_gbps": "capacity TiB x throughput MB/s per TiB / 1000 (SCRATCH_2: 200 MB/s/TiB baseline)"}

    def __init__(self, key: str) -> None:
        self.key = key  # its section's key under the spec's storage

    # --- what the section buys
    def summary(self, spec: Any, section: Fsx, kit: Any) -> Dict[str, Any]:
        tib = section.storage_capacity_gib / 1024
        rate = per_tib(section)
        dras = [{"file_system_path": d.file_system_path, "node_path": section.node_path(d.file_system_path),
                 "s3": association_s3_path(spec.storage, d, created_bucket=f"<{spec.name} data bucket>"),
                 "auto_import": list(d.auto_import), "auto_export": list(d.auto_export)}
                for d in section.data_repository_associations]
        return {"deployment_type": section.deployment_type, "capacity_gib": section.storage_capacity_gib,
                "capacity_tib": round(tib, 2), "throughput_mbps_per_tib": rate,
                "throughput_gbps": round(tib * rate / 1000, 2), "efa": section.efa, "associations": len(dras),
                "data_repository_associations": dras, "mount_point": section.mount_point}

    def summary_lines(self, s: Mapping[str, Any], kit: Any) -> List[str]:
        head = (f"  storage: {TARGET} {s['deployment_type']} {s['capacity_gib']} GiB "
                f"({kit.plain(s['capacity_tib'], 6)} TiB), {kit.plain(s['throughput_gbps'], 6)} GB/s aggregate "
                f"({s['throughput_mbps_per_tib']} MB/s per TiB){', EFA' if s['efa'] else ''}, "
                f"{s['associations']} S3 association(s)")
        return [head] + [f"    {d['node_path']} {kit.arrows[bool(d['auto_import']), bool(d['auto_export'])]} {d['s3']}"
                         for d in s["data_repository_associations"]]

    def summary_html(self, s: Mapping[str, Any], kit: Any) -> str:
        return (f"<p>{TARGET} {kit.escape(s['deployment_type'])}: {s['capacity_gib']} GiB "
                f"({kit.plain(s['capacity_tib'], 6)} TiB), "
                f"{kit.plain(s['throughput_gbps'], 6)} GB/s ({s['throughput_mbps_per_tib']} MB/s per TiB), "
                f"{s['associations']} S3 association(s)</p>"
                + "".join(f"<p>{kit.escape(d['node_path'])} ↔ {kit.escape(d['s3'])}</p>"
                          for d in s["data_repository_associations"]))

    # --- cost
    def charges(self, spec: Any, section: Fsx, kit: Any) -> List[Dict[str, Any]]:
        table, why = kit.regional(PRICE["usd_per_gib_month"], spec.region) if "usd_per_gib_month" in PRICE \
            else ({}, None)
        by_type = table.get(section.deployment_type)
        per_gib = by_type.get(str(section.throughput_per_tib)) if isinstance(by_type, dict) else by_type
        detail = f"{section.deployment_type} {section.storage_capacity_gib} GiB" + (
            f", {section.throughput_per_tib} MB/s per TiB" if section.deployment_type != "SCRATCH_2" else "")
        notes = [why] if why else []
        if per_gib is None:
            notes.append(f"no figure for {detail} in the data" + (f": {PRICE['searched']}" if "searched" in PRICE
                                                                     else ""))
        usd = None if per_gib is None else section.storage_capacity_gib * per_gib
        return [{"item": TARGET, "detail": detail, "usd_per_month": usd, "entry": PRICE, "notes": notes,
                 "formula": "GiB x USD per GiB-month", "inputs": {"gib": section.storage_capacity_gib,
                                                                   "usd_per_gib_month": per_gib}}]

    def capacity_billing(self, spec: Any, section: Any) -> Optional[str]:
        return f"{TARGET} bills its provisioned capacity, whatever it holds: unpriced in this data (see the cost section)"

    # --- checkpoints
    def checkpoint_targets(self, spec: Any, section: Optional[Fsx], size: float, group: Any, steps: Any,
                           kit: Any) -> List[Dict[str, Any]]:
        if section is None:
            why = f"the spec has no storage.{self.key}"
            return [{"target": TARGET, "available": False, "reason": why},
                    {"target": EXPORT_TARGET, "available": False, "reason": why}]
        ceiling = bytes_per_s(section)
        clients = client_bytes_per_s(group, section.efa, kit)
        rate = min(ceiling, clients)
        inputs = dict(size=size, capacity_tib=section.storage_capacity_gib / 1024, mbps_per_tib=per_tib(section),
                      client_bytes_per_s=clients)
        formula = "size / min(capacity TiB x MB/s per TiB, nodes x client network)"
        write = kit.fig(size / rate, "s", formula, **inputs)
        direct = {"target": TARGET, "available": True, "write": write,
                  "restore": kit.fig(size / rate, "s", formula, **inputs), "write_steps": steps(kit.val(write)),
                  "limited_by": "file system throughput" if ceiling <= clients else "client network",
                  "durable": section.persistent, "unverified": True,
                  "note": "PERSISTENT_2 replicates within the AZ" if section.persistent
                  else "SCRATCH_2 does not replicate: a failed server loses data"}
        dras = section.data_repository_associations
        exporting = [d.file_system_path for d in dras if d.auto_export]
        ck = spec.checkpoints
        if ck is not None and ck.tier != "managed":  # the deployed choice: the checkpoint directory's association
            exporting = [d.file_system_path for d in dras if ck.export_to_s3 and "NEW" in d.auto_export
                         and (ck.directory + "/").startswith(d.file_system_path.rstrip("/") + "/")]
        s3: Dict[str, Any] = {"target": EXPORT_TARGET, "available": bool(dras)}
        if not dras:
            s3["reason"] = f"no data repository association links {self.short} to S3"
            return [direct, s3]
        both = f"max(size / min({self.short}, clients), 2 x size / {self.short} throughput)"
        through = max(size / rate, 2 * size / ceiling)
        if exporting:
            s3["write"] = kit.fig(through, "s", both, **inputs)
            s3["write_steps"] = steps(through)
            s3["exported_from"] = exporting
        else:
            s3["write_reason"] = f"no association has auto_export: checkpoints stay on {self.short} unless exported by a task"
        s3["restore"] = kit.fig(through, "s", both + " (lazy import, then read)", **inputs)
        s3.update(durable=True, unverified=True, note="export and import run through the file servers (assumption)")
        return [direct, s3]

    def checkpoint_fits(self, spec: Any, section: Fsx, need: float) -> List[Dict[str, Any]]:
        have = section.storage_capacity_gib * 2**30
        return [{"where": self.short, "need_bytes": need, "have_bytes": have, "fits": need <= have,
                 "formula": f"keep x size vs {self.short} capacity (shared with everything else on it)"}]

    # --- the data path
    def stream(self, spec: Any, section: Optional[Fsx], bytes_per_s_needed: float, group: Any,
               kit: Any) -> Dict[str, Any]:
        if section is None:
            return {self.key: None, "delivers": None,
                    "note": f"no {self.short} in the spec: the data path is not checked against {self.short}"}
        ceiling = bytes_per_s(section)
        return {self.key: kit.fig(ceiling, "bytes/s", "capacity TiB x MB/s per TiB",
                                  capacity_gib=section.storage_capacity_gib),
                f"share_of_{self.key}": bytes_per_s_needed / ceiling, "delivers": bytes_per_s_needed <= ceiling}

    # --- the diagram
    def diagram(self, spec: Any, section: Fsx, graph: Any, kit: Any) -> None:
        storage, fsx, node = spec.storage, section, self.key
        tib = fsx.storage_capacity_gib / 1024
        graph.vpc.node(node, f"{TARGET} {fsx.deployment_type}\n{fsx.storage_capacity_gib} GiB ({tib:.4g} TiB) · "
                       f"{tib * per_tib(fsx) / 1000:.3g} GB/s\nmounted at {fsx.mount_point}" + (" · EFA" if fsx.efa else ""),
                       shape="cylinder", fillcolor=COLOR)
        for anchor, cluster, _, _ in graph.anchors:
            graph.vpc.edge(anchor, node, ltail=cluster, dir="both", color="#1565c0", label="Lustre")
        for d in fsx.data_repository_associations:
            # Drawn from the bucket the association really links, at the path nodes see.
            bucket = association_bucket(storage, d)
            s3 = graph.bucket if bucket is None or bucket == storage.data_bucket.existing_name else f"s3_{bucket}"
            if s3 != graph.bucket:
                graph.top.node(s3, f"S3\n{bucket}", shape="cylinder", fillcolor=graph.bucket_color)
            s3_path = association_s3_path(storage, d, created_bucket=f"<{graph.data_bucket}>")
            node_path = fsx.node_path(d.file_system_path)
            if d.auto_export:
                graph.top.edge(node, s3, label=f"{node_path} → {s3_path}\nexport", color="#c62828")
            if d.auto_import:
                graph.top.edge(s3, node, label=f"{s3_path} → {node_path}\nimport", color="#c62828")
            if not d.auto_export and not d.auto_import:
                graph.top.edge(node, s3, label=f"{node_path} ↔ {s3_path}\nlazy load", style="dotted")

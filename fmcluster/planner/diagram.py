"""The cluster as a picture, drawn with Graphviz (the `graphviz` package runs Debian's `dot`).

Node groups with their NVLink domains and instances (collapsed beyond a few), the EFA
fabric and placement group, the data bucket and each shared store the spec configures as
the store draws itself (its figures.py: a file system with its links to S3), the
orchestrator, and AMP/Grafana when observability is on.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, List

from fmcluster.planner.stores import KIT, stores

FONT = "DejaVu Sans"
SHOWN_DOMAINS = 2  # per group; the rest collapse into one "more" box
SHOWN_NODES = 2  # per NVLink domain
COLORS = {"gpu": "#e8f5e9", "domain": "#c8e6c9", "cpu": "#eceff1", "efa": "#ffe0b2", "s3": "#ffcdd2",
          "orch": "#fff9c4", "obs": "#e1bee7", "vpc": "#fafafa"}


class DiagramUnavailable(Exception):
    """Graphviz (the Python package or the dot binary) is not installed."""


def _graphviz() -> Any:
    try:
        import graphviz
    except ImportError:
        raise DiagramUnavailable("the Python package graphviz is not installed (pip install graphviz)") from None
    return graphviz


def graph(spec: Any) -> Any:
    gv = _graphviz()
    g = gv.Digraph(name=spec.name, graph_attr={
        "rankdir": "LR", "compound": "true", "fontname": FONT, "fontsize": "16", "nodesep": "0.25", "ranksep": "0.7",
        "labelloc": "t", "label": f"{spec.name} — {spec.region} ({spec.availability_zone})", "bgcolor": "white",
        "pad": "0.3"},
        node_attr={"shape": "box", "style": "rounded,filled", "fontname": FONT, "fontsize": "11", "fillcolor": "white"},
        edge_attr={"fontname": FONT, "fontsize": "10", "color": "#546e7a"})
    with g.subgraph(name="cluster_vpc") as vpc:
        vpc.attr(label=f"VPC · private node subnet in {spec.availability_zone}", style="rounded,filled",
                 fillcolor=COLORS["vpc"], color="#90a4ae", fontsize="12")
        anchors = [_group(vpc, grp, i, spec.placement_of(grp)) for i, grp in enumerate(spec.node_groups)]
        if any(grp.efa_enabled for grp in spec.node_groups):
            vpc.node("efa", "EFA fabric\n(EFA security group:\nall traffic to and from itself)", shape="hexagon",
                     fillcolor=COLORS["efa"])
        _orchestrator(vpc, spec, anchors)
        _storage(vpc, g, spec, anchors)
    for (anchor, cluster, efa, gbps) in anchors:
        if efa:
            g.edge(anchor, "efa", ltail=cluster, dir="both", color="#ef6c00", penwidth="2", label=f"{gbps:g} Gbps/node")
    _observability(g, spec)
    return g


def _group(parent: Any, grp: Any, index: int, placement: str) -> tuple:
    t = grp.instance
    cluster = f"cluster_group_{index}"
    with parent.subgraph(name=cluster) as c:
        gpus = f" · {grp.count * t.gpus} {t.gpu}" if t.is_gpu else ""
        c.attr(label=f"{grp.name}: {grp.count} x {grp.instance_type}{gpus}\nplacement group: {placement} · "
                     f"capacity: {grp.capacity.type}", style="rounded,filled", color="#43a047" if t.is_gpu else "#90a4ae",
               fillcolor=COLORS["gpu"] if t.is_gpu else COLORS["cpu"], fontsize="12")
        if not t.is_gpu:
            anchor = f"g{index}_nodes"
            c.node(anchor, f"{grp.count} x {grp.instance_type}\n{t.vcpus} vCPU each", fillcolor="white")
            return anchor, cluster, False, 0.0
        domain = max(t.nvlink_domain_gpus, t.gpus, 1)
        per_domain = max(domain // t.gpus, 1)
        domains = math.ceil(grp.count / per_domain)
        first = ""
        for d in range(min(domains, SHOWN_DOMAINS)):
            nodes = min(per_domain, grp.count - d * per_domain)
            name = f"cluster_g{index}_d{d}"
            with c.subgraph(name=name) as dom:
                link = f"{t.nvlink_gbs_per_gpu:g} GB/s per GPU (bidirectional)" if t.nvlink_gbs_per_gpu else "no NVLink"
                dom.attr(label=f"NVLink domain {d + 1}: {nodes * t.gpus} GPU{'s' if nodes * t.gpus > 1 else ''}, {link}",
                         style="rounded,filled", fillcolor=COLORS["domain"], color="#2e7d32", fontsize="11")
                for n in _node_labels(nodes, t):
                    node_id = f"g{index}_d{d}_{n[0]}"
                    dom.node(node_id, n[1], fillcolor="white")
                    first = first or node_id
        if domains > SHOWN_DOMAINS:
            more = domains - SHOWN_DOMAINS
            c.node(f"g{index}_more", f"… {more} more NVLink domain{'s' if more > 1 else ''}", shape="note",
                   fillcolor=COLORS["domain"])
        return first, cluster, grp.efa_enabled, t.efa_gbps


def _node_labels(nodes: int, t: Any) -> List[tuple]:
    efa = f" · {t.efa_interfaces} EFA" if t.efa_interfaces else ""
    label = f"{t.name}\n{t.gpus} x {t.gpu}, {t.gpu_memory_mib / 1024:.0f} GiB each{efa}"
    out = [(str(i), label) for i in range(min(nodes, SHOWN_NODES))]
    if nodes > SHOWN_NODES:
        out.append(("more", f"… {nodes - SHOWN_NODES} more instance{'s' if nodes - SHOWN_NODES > 1 else ''}"))
    return out


def _orchestrator(parent: Any, spec: Any, anchors: List[tuple]) -> None:
    kind = spec.orchestrator_kind
    described = kind.describe(spec)
    label = described if kind.nodes.agent or kind.extra_instances(spec) else f"no orchestrator\n({described})"
    for extra in kind.extra_instances(spec):
        label += f"\n{extra.role} {extra.count} x {extra.instance_type}"
    parent.node("orchestrator", label, fillcolor=COLORS["orch"], shape="component")
    for anchor, cluster, _, _ in anchors:
        parent.edge("orchestrator", anchor, lhead=cluster, style="dashed", label="schedules")


def _storage(vpc: Any, top: Any, spec: Any, anchors: List[tuple]) -> None:
    data_bucket = spec.storage.data_bucket.existing_name or f"{spec.name} data bucket"
    top.node("s3", f"S3\n{data_bucket}", shape="cylinder", fillcolor=COLORS["s3"])
    drawing = SimpleNamespace(vpc=vpc, top=top, anchors=anchors, bucket="s3", data_bucket=data_bucket,
                              bucket_color=COLORS["s3"])
    for _, figures, section in stores(spec):
        if section is not None:
            figures.diagram(spec, section, drawing, KIT)


def _observability(g: Any, spec: Any) -> None:
    obs = spec.observability
    if not obs.enabled:
        return
    g.node("amp", "Amazon Managed Service\nfor Prometheus\n(rules, alerts → SNS)", fillcolor=COLORS["obs"])
    g.edge("orchestrator", "amp", ltail="cluster_vpc", style="dashed", label="node metrics (remote write)")
    if obs.grafana:
        g.node("grafana", "Amazon Managed Grafana", fillcolor=COLORS["obs"])
        g.edge("amp", "grafana", style="dashed")


DOT_TIMEOUT_S = 60  # a cluster's diagram renders in well under a second
DOT_MAX_BYTES = 32 << 20


def render(spec: Any, fmt: str = "svg") -> bytes:
    """What Graphviz's dot renders of the spec's graph, under a timeout and an output bound."""
    import shutil
    import subprocess

    dot = shutil.which("dot")
    if dot is None:
        raise DiagramUnavailable("Graphviz's dot is not installed (Debian/Ubuntu: apt-get install graphviz; "
                                 "make setup installs it)")
    try:
        done = subprocess.run([dot, f"-T{fmt}"], input=graph(spec).source.encode("utf-8"), capture_output=True,
                              timeout=DOT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise DiagramUnavailable(f"Graphviz's dot did not finish within {DOT_TIMEOUT_S} s") from None
    except OSError as e:
        raise DiagramUnavailable(f"Graphviz's dot could not run ({e})") from None
    if done.returncode != 0 or not done.stdout:
        reason = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise DiagramUnavailable(f"Graphviz's dot failed: {reason[0][:200]}")
    if len(done.stdout) > DOT_MAX_BYTES:
        raise DiagramUnavailable(f"Graphviz's dot wrote more than {DOT_MAX_BYTES >> 20} MB")
    return done.stdout


def svg(spec: Any) -> str:
    """The SVG element alone, ready to inline in HTML."""
    text = render(spec, "svg").decode("utf-8")
    return text[text.find("<svg"):]


def file_bytes(spec: Any, fmt: str) -> bytes:
    """What `diagram --out` writes: the Graphviz source for dot and gv, else what dot renders."""
    if fmt in ("dot", "gv"):
        return graph(spec).source.encode("utf-8")
    return render(spec, fmt)

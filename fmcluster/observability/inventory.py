"""Alerts that need the spec: how many nodes each node group should have and how many GPUs each of its nodes.

Each node's collector scrapes only that node. When a node hangs, or its remote write stops, nothing is left to
say "down": its series go stale and its own firing alerts resolve. Only an expectation fixed outside the nodes can
notice. The observability stack renders these expectations at synth, from the spec's node group counts and the
catalog's GPUs per instance type, as recording rules of constants. Static alerts compare the live series with them:

- ``NodeGroupBelowExpected``: fewer nodes of a group report than the spec says (a group with no series at all
  counts as 0, so a group that never came up or went entirely silent fires too);
- ``GpusMissingOnNode``: a node of a GPU group exports fewer GPUs than its instance type has (a GPU that fell off
  the bus, or a reporting node without any GPU series; a node that says it runs no GPU exporter is left to the
  static ``GpuMetricsUnavailable``);
- ``SlurmCollectorAbsent`` (orchestrators that run Slurm): no Slurm collector reports, so the Slurm alerts cannot
  fire.

The static ``NodeStoppedReporting`` alert in rules.yaml names the node that went silent.

Plain props, no spec: `ExpectedNodes` is built by the stack (fmcluster/stacks/observability.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

GROUP_NAME = "fmcluster.inventory"
EXPECTED_NODES = "fmcluster:expected_nodes:count"
EXPECTED_GPUS = "fmcluster:expected_gpus_per_node:count"


@dataclass(frozen=True)
class ExpectedNodes:
    """One node group as the collectors label it (``node_group``), with the nodes and GPUs per node it should have."""

    node_group: str
    nodes: int
    gpus_per_node: int = 0

    def __post_init__(self) -> None:
        if not self.node_group or self.nodes < 0 or self.gpus_per_node < 0:
            raise ValueError(f"ExpectedNodes: bad expectation {self!r}")


def _constant(record: str, value: int, cluster: str, node_group: str) -> Dict[str, Any]:
    return {"record": record, "expr": f"vector({int(value)})", "labels": {"cluster": cluster, "node_group": node_group}}


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str, runbook: str) -> Dict[str, Any]:
    return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": severity, "category": "inventory"},
            "annotations": {"summary": summary, "description": description, "runbook": runbook}}


NODE_GROUP_BELOW_EXPECTED = _alert(
    "NodeGroupBelowExpected",
    # missing = expected - reporting; a group without any series reports 0 (the `or` branch)
    f"{EXPECTED_NODES} - on (cluster, node_group) group_left () "
    f'(count by (cluster, node_group) (up{{job="node"}}) or {EXPECTED_NODES} * 0) > 0',
    # 15 minutes: a replacement or a reboot takes that long; the first deploy fires until the nodes boot
    "15m", "critical",
    "{{ $value }} node(s) of group {{ $labels.node_group }} are not reporting",
    "The spec gives the group more nodes than report metrics: nodes hung, terminated or never joined, or their "
    "collector stopped. Their own alerts cannot fire while they are silent.",
    "Compare the group's instances (EC2 console, HyperPod list-cluster-nodes, PCS compute node group) with the "
    "nodes on the cluster-overview dashboard; NodeStoppedReporting names a node that went silent in the last hour. "
    "On a silent node: systemctl status fmcluster-collector fmcluster-node-exporter.",
)

GPUS_MISSING_ON_NODE = _alert(
    "GpusMissingOnNode",
    # GPUs each node's dcgm-exporter reports; 0 for a node that reports (node_exporter or dcgm-exporter up) without
    # GPU series: its exporter lost the GPUs, or it does not run. A node that says it has no GPU exporter
    # (fmcluster_gpu_metrics_unavailable) is left to GpuMetricsUnavailable.
    f'(count by (cluster, node_group, node) (DCGM_FI_DEV_GPU_TEMP) '
    f'or (count by (cluster, node_group, node) (up{{job=~"node|dcgm"}} == 1) * 0 '
    f"unless on (cluster, node) fmcluster_gpu_metrics_unavailable == 1)) "
    f"< on (cluster, node_group) group_left () {EXPECTED_GPUS}",
    "5m", "critical",
    "Node {{ $labels.node }} reports {{ $value }} GPUs, fewer than its instance type has",
    "dcgm-exporter sees fewer GPUs than the instance type has (0: none, or no dcgm-exporter reports from the node): "
    "a GPU fell off the bus (Xid 79), the driver lost it, or the exporter is not running.",
    "On the node: nvidia-smi -L and journalctl -k | grep -i -e xid -e NVRM; systemctl status fmcluster-dcgm-exporter. "
    "A lost GPU: drain the node and replace it.",
)

SLURM_COLLECTOR_ABSENT = _alert(
    "SlurmCollectorAbsent",
    "absent(fmcluster_slurm_collector_success{cluster=\"__CLUSTER__\"})",
    "15m", "warning",
    "No Slurm collector reports for cluster {{ $labels.cluster }}",
    "No node writes fmcluster_slurm_collector_success: the Slurm alerts (drained, down nodes) cannot fire.",
    "On the HyperPod controller, the PCS login node or the ParallelCluster head node: systemctl status "
    "fmcluster-slurm-textfile.timer fmcluster-collector; journalctl -u fmcluster-slurm-textfile.",
)


def inventory_group(cluster: str, expected: Sequence[ExpectedNodes], *, slurm: bool) -> Dict[str, Any]:
    """The ``fmcluster.inventory`` rule group for `cluster` (a Prometheus rule group, as a dict)."""
    rules: List[Dict[str, Any]] = []
    for e in expected:
        rules.append(_constant(EXPECTED_NODES, e.nodes, cluster, e.node_group))
        if e.gpus_per_node:
            rules.append(_constant(EXPECTED_GPUS, e.gpus_per_node, cluster, e.node_group))
    rules += [NODE_GROUP_BELOW_EXPECTED, GPUS_MISSING_ON_NODE]
    if slurm:
        absent = dict(SLURM_COLLECTOR_ABSENT)
        absent["expr"] = str(absent["expr"]).replace("__CLUSTER__", cluster)
        rules.append(absent)
    return {"name": GROUP_NAME, "interval": "1m", "rules": rules}


def render_group(group: Dict[str, Any]) -> str:
    """`group` as YAML lines that continue a rules file's top-level ``groups:`` list."""
    import yaml

    text = yaml.safe_dump([group], sort_keys=False, width=120, default_flow_style=False)
    return "".join(f"  {line}" if line.strip() else line for line in text.splitlines(keepends=True))

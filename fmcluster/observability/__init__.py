"""Observability as code: alert rules, the Alertmanager configuration, dashboards and the metric catalog.

The files beside this module are package data, read relative to this file:

- ``rules.yaml``: recording and alerting rules (the AMP rule groups namespace).
- ``rules.<name>.yaml``: rule groups on metrics only some orchestrator kinds produce, added for a kind that names them
  (`OrchestratorKind.rule_groups`).
- a store's ``rules.yaml`` in its folder (``platforms/storage/<store>/``, `Store.rules`): its groups, added where the
  spec configures the store.
- ``alertmanager.yaml``: the Alertmanager configuration, routed to the alert SNS topic.
- ``../runtime/observability/dcgm-counters.csv`` (shipped to the nodes): the DCGM fields dcgm-exporter collects on
  every GPU, and ``dcgm-counters-<gpu_arch>.csv`` those of one GPU architecture (NVLink error counters).
- ``dashboards/*.json``: Grafana dashboards; the storage dashboard and the cluster overview without the stores'
  panels, which each store's folder holds (``dashboard.json``, `Store.dashboard`) and `dashboards` composes in
  (panels.py). The composed dashboards users import are written to the repository's ``dashboards/``
  (scripts/dashboards.py; docs/observability.md).

`metrics` is the catalog of every metric those files use and which exporter produces it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from fmcluster.observability.inventory import ExpectedNodes, inventory_group, render_group

HERE = Path(__file__).parent
RULES_FILE = HERE / "rules.yaml"
ALERTMANAGER_FILE = HERE / "alertmanager.yaml"
DCGM_COUNTERS_FILE = HERE.parent / "runtime" / "observability" / "dcgm-counters.csv"
DASHBOARD_DIR = HERE / "dashboards"
# the stores' rule files, found by the folder layout (a store's folder holds everything that names it)
STORE_RULE_FILES = tuple(sorted((HERE.parent / "platforms" / "storage").glob("*/rules.yaml")))
STORE_DASHBOARD_FILES = tuple(sorted((HERE.parent / "platforms" / "storage").glob("*/dashboard.json")))

_TOPIC = "__TOPIC_ARN__"
_REGION = "__REGION__"


def rule_files() -> List[Path]:
    """rules.yaml, then every optional rules.<name>.yaml, then every store's rules.yaml."""
    return [RULES_FILE] + sorted(HERE.glob("rules.*.yaml")) + list(STORE_RULE_FILES)


def extra_rules_file(name: str) -> Path:
    path = HERE / f"rules.{name}.yaml"
    if not path.is_file():
        raise ValueError(f"no rule file {path.name} beside {RULES_FILE.name}")
    return path


def _groups_only(text: str) -> str:
    """A rules file's group list without its ``groups:`` line (and anything above it), to append to another."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    return "".join(lines[start + 1:])


def rules_text(
    cluster: Optional[str] = None, expected: Sequence[ExpectedNodes] = (), *, slurm: bool = False,
    extra: Sequence[str] = (), stores: Sequence[Path] = (), serving: Optional[Any] = None,
) -> str:
    """The rules file as AMP takes it (the Data of AWS::APS::RuleGroupsNamespace).

    With `cluster`, the ``fmcluster.inventory`` group rendered from the expected nodes follows the static groups
    (fmcluster/observability/inventory.py), then with `serving` (the spec's serving section) the
    ``fmcluster.serving`` group (fmcluster/observability/serving_rules.py); without it, rules.yaml verbatim. `extra`
    names optional rule files (``rules.<name>.yaml``) whose groups follow rules.yaml's, then the `stores`' rule files'
    groups."""
    text = RULES_FILE.read_text(encoding="utf-8")
    if cluster is None and not extra and not stores:
        return text
    if not text.endswith("\n"):
        text += "\n"
    for name, path in [(extra_rules_file(n).name, extra_rules_file(n)) for n in extra] + [
            (str(path.relative_to(HERE.parent.parent)), path) for path in stores]:
        text += f"\n  # {name}\n" + _groups_only(path.read_text(encoding="utf-8"))
        if not text.endswith("\n"):
            text += "\n"
    if cluster is None:
        return text
    header = "\n  # rendered at synth from the spec's node groups (fmcluster/observability/inventory.py)\n"
    text += header + render_group(inventory_group(cluster, expected, slurm=slurm))
    if serving is not None:
        from fmcluster.observability.serving_rules import serving_group

        text += ("\n  # rendered at synth from the spec's serving deployments "
                 "(fmcluster/observability/serving_rules.py)\n" + render_group(serving_group(cluster, serving)))
    return text


def load_rules() -> Dict[str, Any]:
    """Every static rule group: rules.yaml's, the optional files' and the stores'."""
    import yaml

    data = yaml.safe_load(rules_text(extra=[p.name.split(".")[1] for p in sorted(HERE.glob("rules.*.yaml"))],
                                     stores=STORE_RULE_FILES))
    if not isinstance(data, dict) or "groups" not in data:
        raise ValueError(f"{RULES_FILE}: expected a mapping with groups")
    return data


def iter_rules() -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(group name, rule) for every recording and alerting rule."""
    for group in load_rules()["groups"]:
        for rule in group["rules"]:
            yield group["name"], rule


def alert_names() -> List[str]:
    return [rule["alert"] for _, rule in iter_rules() if "alert" in rule]


def alertmanager_config(topic_arn: str, region: str) -> str:
    """The Alertmanager configuration (what ``amtool check-config`` checks), routed to `topic_arn`.

    `topic_arn` may be a CDK token: it is substituted as text and CloudFormation resolves it.
    """
    text = ALERTMANAGER_FILE.read_text(encoding="utf-8")
    if _TOPIC not in text or _REGION not in text:
        raise ValueError(f"{ALERTMANAGER_FILE}: placeholders missing")
    return text.replace(_TOPIC, topic_arn).replace(_REGION, region)


def alertmanager_definition(topic_arn: str, region: str) -> str:
    """The AMP alert manager definition: the configuration under ``alertmanager_config: |``."""
    body = alertmanager_config(topic_arn, region)
    lines = [line for line in body.splitlines(keepends=True) if not line.lstrip().startswith("#")]
    indented = "".join(f"  {line}" if line.strip() else line for line in lines)
    return "alertmanager_config: |\n" + indented


def dcgm_arch_files() -> Dict[str, Path]:
    """GPU architecture (the catalog's gpu_arch) -> its dcgm-counters-<gpu_arch>.csv."""
    prefix = DCGM_COUNTERS_FILE.stem + "-"
    return {p.stem[len(prefix):]: p for p in sorted(DCGM_COUNTERS_FILE.parent.glob(f"{prefix}*.csv"))}


def dcgm_fields(gpu_arch: Optional[str] = None) -> List[str]:
    """The DCGM field names enabled in dcgm-counters.csv, plus those of `gpu_arch`'s file when given (comment
    lines and label fields left out)."""
    files = [DCGM_COUNTERS_FILE] + ([dcgm_arch_files()[gpu_arch]] if gpu_arch else [])
    return [name for path in files for name in _csv_fields(path)]


def _csv_fields(path: Path) -> List[str]:
    fields = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, kind = (part.strip() for part in line.split(",")[:2])
        if kind != "label":
            fields.append(name)
    return fields


def dashboards(stores: Sequence[Path] = STORE_DASHBOARD_FILES) -> Dict[str, Dict[str, Any]]:
    """File stem → dashboard JSON model, for every dashboard shipped, with the `stores`' panels (their
    ``dashboard.json``, in the stores' order) composed into the storage dashboard and the cluster overview."""
    from fmcluster.observability.panels import BASE, composed, store_parts

    parts = store_parts(stores)
    found = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(DASHBOARD_DIR.glob("*.json"))}
    return {name[:-len(BASE)] if name.endswith(BASE) else name:
            composed(name[:-len(BASE)], d, parts) if name.endswith(BASE) else d for name, d in found.items()}


def dashboard_queries(dashboard: Dict[str, Any]) -> List[str]:
    """Every PromQL expression of a dashboard: panel targets (nested rows too) and query variables."""
    exprs: List[str] = []

    def panels(items: List[Dict[str, Any]]) -> None:
        for panel in items:
            exprs.extend(t["expr"] for t in panel.get("targets", []) if t.get("expr"))
            panels(panel.get("panels", []))

    panels(dashboard.get("panels", []))
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var.get("query")
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs

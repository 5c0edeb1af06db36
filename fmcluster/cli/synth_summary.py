"""What `fmcluster synth` says before a deploy: per stack, its resources, what a delete leaves behind, the deploy
order and the next commands.

Read back from the cloud assembly synth wrote (manifest.json and the templates), so the summary describes exactly
what `cdk deploy --app <dir>` would deploy: the CDK CLI deploys a synthesized assembly directory without running the
app again (aws-cdk pull request 2636, "decouple synth and deploy through cloud assemblies").
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

from fmcluster.planner.text import ARROWS

STACK_ARTIFACT = "aws:cloudformation:stack"  # artifact type of a stack in a cloud assembly manifest
DELETED = ("Delete", None)  # DeletionPolicy values (or its absence) under which CloudFormation deletes the resource


class AssemblyUnreadable(Exception):
    """The directory holds no cloud assembly synth could have written."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AssemblyUnreadable(f"{path}: {e}") from None


def stacks_of(out: Path) -> List[Dict[str, Any]]:
    """The assembly's stacks in deploy order: each after the stacks it depends on (manifest order breaks ties)."""
    artifacts = _read_json(out / "manifest.json").get("artifacts", {})
    found: Dict[str, Dict[str, Any]] = {}
    for artifact_id, artifact in artifacts.items():
        if artifact.get("type") != STACK_ARTIFACT:
            continue
        props = artifact.get("properties", {})
        resources = _read_json(out / props["templateFile"]).get("Resources", {})
        kept = [{"logical_id": lid, "type": r.get("Type", "?"), "deletion_policy": r.get("DeletionPolicy")}
                for lid, r in resources.items() if r.get("DeletionPolicy") not in DELETED]
        found[artifact_id] = {
            "stack": props.get("stackName", artifact_id),
            "template": props["templateFile"],
            "resources": len(resources),
            "resource_types": dict(sorted(Counter(r.get("Type", "?") for r in resources.values()).items())),
            "termination_protection": bool(props.get("terminationProtection", False)),
            "retained": kept,
            "depends_on": [d for d in artifact.get("dependencies", []) if artifacts.get(d, {}).get("type")
                           == STACK_ARTIFACT],
        }
    ordered: List[Dict[str, Any]] = []
    placed: set = set()
    while len(ordered) < len(found):
        ready = [a for a, s in found.items() if a not in placed and all(d in placed for d in s["depends_on"])]
        if not ready:  # a cycle; CloudFormation deploy would refuse it too, so say so rather than loop
            raise AssemblyUnreadable(f"{out / 'manifest.json'}: stack dependencies form a cycle")
        for a in ready:
            placed.add(a)
            ordered.append(found[a])
    names = {a: s["stack"] for a, s in found.items()}
    for s in ordered:
        s["depends_on"] = [names[d] for d in s["depends_on"]]
    return ordered


def summary(spec: Any, out: Path, spec_file: str) -> Dict[str, Any]:
    """The summary as data: what `--json` prints and the text is rendered from."""
    from fmcluster.cli.cdk_cli import cdk
    from fmcluster.registry import kind_of, stores

    stacks = stacks_of(out)
    protected = [s["stack"] for s in stacks if s["termination_protection"]]
    result: Dict[str, Any] = {
        "out": str(out),
        "stacks": stacks,
        "deploy_order": [s["stack"] for s in stacks],
        "next_commands": [
            f"fmcluster preflight {spec_file}",
            cdk(f"deploy --app {out} --all"),
            f"fmcluster status {spec_file}",
            f"fmcluster job nccl {spec_file} --out {_job_file(spec)}",
        ],
        "way_in": kind_of(spec).way_in(spec),
        "nodes": [{"group": g.name, "count": g.count, "instance_type": g.instance_type,
                   "capacity": g.capacity.type, "arrival": kind_of(spec).node_arrival(spec, g)}
                  for g in spec.node_groups],
        "teardown": "docs/teardown.md",
        "termination_protected": protected,
        "file_system": None,
        # every shared store the spec configures, as its store names it (the file system's links: file_system)
        "stores": [{"section": f"storage.{store.spec_key}", "title": store.title,
                    "mount_point": store.section(spec).mount_point}
                   for store in stores() if store.section(spec) is not None],
    }
    from fmcluster.cli.shared_storage import file_system

    found = file_system(spec)
    if found is not None:
        store, section = found
        result["file_system"] = {
            "mount_point": section.mount_point,
            "associations": [{"node_path": link.node_path, "s3": link.s3, "auto_import": list(link.auto_import),
                              "auto_export": list(link.auto_export)}
                             for link in store.s3_links(spec, created_bucket=f"<{spec.name} data bucket>")],
        }
    return result


def _job_file(spec: Any) -> str:
    return "nccl-tests.yaml" if spec.orchestrator_kind.nodes.agent == "kubernetes" else "nccl-tests.sbatch"


def _kept_line(kept: List[Dict[str, Any]]) -> str:
    counts = Counter((k["type"], k["deletion_policy"]) for k in kept)
    return ", ".join(f"{n} {t}" + ("" if policy == "Retain" else f" ({policy})")
                     for (t, policy), n in sorted(counts.items()))


def _kept_bills(s: Dict[str, Any]) -> List[str]:
    """What the stores say of their resources a stack delete keeps and that bill until deleted (`Store.kept_bills`)."""
    from fmcluster.registry import stores

    kept = {k["type"] for st in s["stacks"] for k in st["retained"]}
    return [said for store in stores() for resource_type, said in store.kept_bills if resource_type in kept]


def render(s: Dict[str, Any]) -> str:
    lines = [f"deploy order: {' -> '.join(s['deploy_order'])}"]
    for st in s["stacks"]:
        after = f", after {', '.join(st['depends_on'])}" if st["depends_on"] else ""
        protection = ", termination protection on" if st["termination_protection"] else ""
        lines.append(f"  {st['stack']}: {st['resources']} resources{after}{protection}")
        if st["retained"]:
            lines.append(f"    kept when the stack is deleted: {_kept_line(st['retained'])}")
    lines.append("nodes:")
    lines += [f"  {n['group']}: {n['count']} x {n['instance_type']} ({n['capacity']}) {n['arrival']}" for n in s["nodes"]]
    fs = s["file_system"]
    for store in s.get("stores", []):
        lines.append(f"{store['title']} mounted at {store['mount_point']} on every node ({store['section']})")
        if fs is not None and fs["mount_point"] == store["mount_point"]:
            lines += [f"  {a['node_path']} {ARROWS[bool(a['auto_import']), bool(a['auto_export'])]} {a['s3']}"
                      for a in fs["associations"]]
    lines.append("next:")
    lines += [f"  {c}" for c in s["next_commands"]]
    if s["way_in"]:
        lines.append("way in, after deploy (also the cluster stack's outputs):")
        lines += [f"  {c}" for c in s["way_in"]]
    billing = "".join(f"{said}; " for said in _kept_bills(s))
    if s["termination_protected"] or billing:
        protected = f"{', '.join(s['termination_protected'])} has termination protection; " \
            if s["termination_protected"] else ""
        lines.append(f"teardown: {protected}{billing}see {s['teardown']}")
    return "\n".join(lines)


def print_summary(spec: Any, out: Path, spec_file: str, as_json: bool) -> None:
    try:
        s = summary(spec, out, spec_file)
    except AssemblyUnreadable as e:  # the templates are written; only the summary is missing
        print(f"no summary: {e}", file=sys.stderr)
        return
    print(json.dumps(s, indent=2) if as_json else render(s))

"""A report as terminal text, as Markdown for a pull-request comment, or as JSON."""

from __future__ import annotations

import json
from typing import Any, Dict, List

from fmcluster.diff.changes import ADDED, MODIFIED, REMOVED, REPLACED, ResourceChange
from fmcluster.diff.consequences import Report
from fmcluster.diff.findings import CLASSES, NODES, SAFE, TITLES, Finding

_ACTIONS = (ADDED, REMOVED, MODIFIED, REPLACED)


def as_dict(report: Report) -> Dict[str, Any]:
    stacks: Dict[str, Any] = {}
    for name, changes in sorted(report.stacks.items()):
        entry: Dict[str, List[Dict[str, Any]]] = {a: [] for a in _ACTIONS}
        for c in changes:
            item: Dict[str, Any] = {"logical_id": c.logical_id, "type": c.type}
            if c.action in (MODIFIED, REPLACED):
                item["paths"] = [".".join(p) for p in c.paths]
            if c.because:
                item["because"] = c.because
            if not c.replacement_known:
                item["replacement"] = "unknown: no resource schema (custom resource or nested stack)"
            entry[c.action].append(item)
        stacks[name] = entry
    return {"classes": report.classes(), "deploy_fails": report.deploy_fails, "gpus_affected": report.gpus_affected,
            "stacks": stacks,
            "findings": [f.as_dict() for f in report.findings], "notes": report.notes}


def as_json(report: Report) -> str:
    return json.dumps(as_dict(report), indent=2, sort_keys=True)


FAILS = "The deploy will fail: CloudFormation or the service refuses these changes and the stack rolls back"


def _line(f: Finding) -> str:
    text = f"{'[deploy fails] ' if f.fails else ''}{f.where}: {f.text}"
    if f.cls == NODES:
        text += f"; running jobs {f.jobs}"
    if f.sources:
        text += f" [{', '.join(f.sources)}]"
    return text


def _action(c: ResourceChange) -> str:
    return c.action if c.replacement_known or c.action != MODIFIED else "modified (replacement unknown)"


def _counts(report: Report) -> List[str]:
    lines = []
    for name, changes in sorted(report.stacks.items()):
        if not changes:
            continue
        n = {a: sum(1 for c in changes if c.action == a) for a in _ACTIONS}
        lines.append(f"{name}: {n[ADDED]} added, {n[REMOVED]} removed, {n[MODIFIED]} modified in place, "
                     f"{n[REPLACED]} replaced")
    return lines


def as_text(report: Report) -> str:
    out = []
    if not any(report.stacks.values()):
        return "no changes\n"
    failing = [f for f in report.findings if f.fails]
    if failing:
        out.append(f"{FAILS} ({len(failing)}): " + ", ".join(f.where for f in failing))
    for cls in CLASSES:
        found = [f for f in report.findings if f.cls == cls]
        if found:
            out.append(f"{TITLES[cls]} ({len(found)})")
            out.extend(f"  - {_line(f)}" for f in found)
    out.append("Stacks")
    out.extend(f"  {line}" for line in _counts(report))
    for name, changes in sorted(report.stacks.items()):
        for c in changes:
            out.append(f"    {_action(c):9} {name}/{c.logical_id} ({c.type})")
    out.extend(f"note: {n}" for n in report.notes)
    return "\n".join(out) + "\n"


def as_markdown(report: Report) -> str:
    out = ["## fmcluster diff", ""]
    if not any(report.stacks.values()):
        return "\n".join(out + ["No changes.", ""])
    risky = [c for c in report.classes() if c != SAFE]
    out.append("**" + (f"Attention: {', '.join(risky)}" if risky else "Safe: no data, node, control-plane or capacity "
                       "consequence") + f"** ({report.gpus_affected} GPUs on replaced or terminated instances)")
    out.append("")
    failing = [f for f in report.findings if f.fails]
    if failing:
        out += [f"### {FAILS}", ""] + [f"- `{f.where}`" for f in failing] + [""]
    for cls in CLASSES:
        found = [f for f in report.findings if f.cls == cls]
        if not found:
            continue
        if cls == SAFE:
            out += ["<details><summary>" + f"{TITLES[cls]} ({len(found)})" + "</summary>", ""]
        else:
            out += [f"### {TITLES[cls]}", ""]
        for f in found:
            line = f"- {'**deploy fails** ' if f.fails else ''}`{f.where}`: {f.text}"
            if f.cls == NODES:
                line += f". Running jobs {f.jobs}"
            if f.sources:
                line += " (" + ", ".join(f"[source]({s})" for s in f.sources) + ")"
            out.append(line)
        out += (["", "</details>"] if cls == SAFE else []) + [""]
    out += ["<details><summary>Resources per stack</summary>", ""]
    out += [f"- {line}" for line in _counts(report)]
    out += ["", "| stack | resource | type | action |", "|---|---|---|---|"]
    for name, changes in sorted(report.stacks.items()):
        out += [f"| {name} | `{c.logical_id}` | {c.type} | {_action(c)} |" for c in changes]
    out += ["", "</details>", ""]
    out += [f"> {n}" for n in report.notes]
    return "\n".join(out) + "\n"

"""`plan --html`: one self-contained page (inline CSS and SVG, no scripts, nothing fetched):
the cluster diagram, tables for memory fit, step time, checkpoints, data path and cost,
and a chart of where one step's time goes."""

from __future__ import annotations

from html import escape
from typing import Any, Dict, Iterable, List, Sequence

from fmcluster.planner.chart import legend, step_chart
from fmcluster.planner.figures import GIB, human_bytes, human_count, human_seconds, money, plain, val
from fmcluster.planner.stores import KIT, registered, verdict_store
from fmcluster.planner.text import (
    checkpoint_cost_lines,
    compute_rates,
    hbm_fit,
    percent,
    pinned_lines,
    stream_lines,
    tier_lines,
)
from fmcluster.planner.text import framework_line as text_framework_line

CSS = """
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:0;background:#f4f6f8;color:#1f2933;font-size:14px}
header{background:#263238;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#cfd8dc}main{padding:16px 32px 40px;max-width:1400px}
section{background:#fff;border-radius:8px;padding:14px 20px;margin:16px 0;box-shadow:0 1px 3px rgba(0,0,0,.12)}
h2{font-size:18px;margin:4px 0 10px}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;width:100%;margin:6px 0}th,td{padding:5px 8px;border-bottom:1px solid #e4e7eb;text-align:left;
vertical-align:top}th{background:#eef1f4;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{background:#fff;border-radius:8px;padding:10px 16px;min-width:150px;
box-shadow:0 1px 3px rgba(0,0,0,.12)}.card b{display:block;font-size:20px}.card span{color:#52606d;font-size:12px}
.ok{color:#2e7d32;font-weight:600}.bad{color:#c62828;font-weight:600}.note{color:#52606d;font-size:12px}
.diagram svg{max-width:100%;height:auto}svg.chart{max-width:1100px}
.chart .axis{font-size:12px;fill:#52606d}.chart .lane{font-size:13px;fill:#1f2933}
.chart .track{fill:#eef1f4}.chart .seg{font-size:11px;fill:#fff}.chart .out{font-size:11px;fill:#1f2933}
.chart .idle{font-size:11px;fill:#9aa5b1}
.chart .bound{stroke:#c62828;stroke-width:2;stroke-dasharray:5 4}.swatch{display:inline-block;width:12px;height:12px;
border-radius:2px;margin-right:6px;vertical-align:middle}code{background:#eef1f4;padding:1px 4px;border-radius:3px}
details summary{cursor:pointer;color:#1565c0}
"""


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for r in rows:
        cells = "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def gib(x: float) -> str:
    return f"{x / GIB:.1f}"


def page(report: Dict[str, Any], spec: Any) -> str:
    c = report["cluster"]
    title = f"Capacity plan: {c['name']}"
    subtitle = f"{c['region']} · orchestrator {c['orchestrator']}"
    if "model" in report:
        m, o = report["model"], report["options"]
        subtitle += (f" · model {m['name']} ({human_count(m['params'])} parameters) · {o['precision']} compute at "
                     f"{compute_rates(report)}"
                     f" · {human_count(o['global_batch_tokens'])} tokens per step requested · framework {o['framework']}")
    parts = [f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header><main>", cards(report),
             cluster_section(report, spec)]
    for j in report.get("jobs", []):
        parts.append(job_section(j, report))
    parts.append(cost_section(report))
    parts.append(assumptions_section(report))
    parts.append("</main>")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>\n")


def cards(report: Dict[str, Any]) -> str:
    t = report["cluster"]["total"]
    cost = report["cost"]
    hourly = money(val(cost["total_usd_per_hour"])) + "/h"
    monthly = money(val(cost["total_usd_per_month"])) + "/month"
    if cost["unpriced"]:
        hourly = f"{hourly} + unpriced" if val(cost["total_usd_per_hour"]) else "unpriced"
        monthly = f"{monthly} + unpriced" if val(cost["total_usd_per_hour"]) else "unpriced"
    estimate = " (estimate)" if cost["estimate"] else ""
    items = [(str(t["gpus"]), "GPUs"), (f"{plain(t['bf16_dense_pflops'], 6)}", "PFLOPS dense BF16"),
             (f"{plain(t['hbm_tib'], 6)} TiB", "HBM"),
             (hourly, "per hour, usage not included" + estimate),
             (monthly, f"per month of {cost['hours_per_month']} hours" + estimate)]
    for j in report.get("jobs", []):
        if j["fits"]:
            best = j["best"][0]["step"]
            items.append((human_seconds(val(j["best"][0]["estimate"]["seconds"])), f"step estimate ({j['group']})"))
            items.append((human_seconds(val(best["bound"])), f"step bound ({j['group']})"))
            items.append((human_count(val(best["tokens_per_s"])), f"tokens/s ({j['group']})"))
            usd = money(val(j["tokens"]["usd"])) if j["tokens"]["usd"] is not None else "unknown"
            items.append((usd, f"{human_count(j['tokens']['count'])} tokens ({j['group']})"))
    body = "".join(f'<div class="card"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for v, k in items)
    return f'<div class="cards">{body}</div>'


def cluster_section(report: Dict[str, Any], spec: Any) -> str:
    from fmcluster.planner.diagram import DiagramUnavailable, svg

    try:
        picture = f'<div class="diagram">{svg(spec)}</div>'
    except DiagramUnavailable as e:
        picture = f'<p class="note">No diagram: {escape(str(e))}</p>'
    c = report["cluster"]
    rows = [(escape(g["name"]), f"{g['nodes']} x {escape(g['instance_type'])}", g["gpus"], escape(g["gpu"]),
             g["bf16_dense_pflops"], g["hbm_tib"], f"{g['nvlink_domains']} x {g['nvlink_domain_gpus']}",
             f"{plain(g['efa_gbps_total'], 6)}", g["nvme_tb"], escape(g["capacity"]), escape(g["placement"]),
             escape(", ".join(g["unverified"]) or "-")) for g in c["groups"]]
    groups = table(("group", "nodes", "GPUs", "GPU", "PFLOPS BF16", "HBM TiB", "NVLink domains", "EFA Gbps", "NVMe TB",
                    "capacity", "placement", "unverified"), rows, numeric=(2, 4, 5, 7, 8))
    storage = "".join(store.figures().summary_html(c["storage"][store.spec_key], KIT)
                      if c["storage"][store.spec_key] else f"<p>No {escape(store.title)} in the spec.</p>"
                      for store in registered() if store.spec_key in c["storage"])
    notes = "".join(f"<li>{escape(line)}</li>" for line in c.get("orchestrator_notes", []))
    orchestrator = f"<ul>{notes}</ul>" if notes else ""
    return f"<section><h2>Cluster</h2>{picture}{groups}{storage}{orchestrator}</section>"


def job_section(j: Dict[str, Any], report: Dict[str, Any]) -> str:
    hw = j["hardware"]
    head = (f"<h2>Training job on {escape(j['group'])}: {hw['gpus']} x {escape(hw['gpu'])}</h2><p>NVLink domain "
            f"{hw['nvlink_domain_gpus']} GPUs at {plain(hw['nvlink_gb_s_one_way_per_gpu'], 6)} GB/s per GPU one way; "
            f"{escape(hw['internode_link'])} {plain(hw['internode_gb_s_per_gpu'], 3)} GB/s per GPU; {j['layouts_fitting']} of "
            f"{j['layouts_evaluated']} layouts fit {escape(hbm_fit(hw))}.</p>")
    if not j["fits"]:
        return f'<section>{head}<p class="bad">{escape(j["overflow"])}</p>{pinned_section(j)}</section>'
    return (f"<section>{head}{tie_paragraph(j)}{memory_table(j)}{estimate_table(j)}{pinned_section(j)}{step_section(j)}"
            f"{expert_table(j)}{checkpoint_table(j)}{data_paragraph(j)}{all_layouts(j)}</section>")


def tie_paragraph(j: Dict[str, Any]) -> str:
    t = j["ties"]
    members = ", ".join(f"<code>{escape(k)}</code>" for k in t["members"])
    return (f"<h3>Tie group: {t['size']} layout(s) the estimate cannot order</h3><p>Within {t['ratio']:.2f}x of the "
            f"fastest ({escape(t['fastest'])}): two estimates each off by up to ±{t['band']:.0%} can be in either order "
            f"({escape(t['band_source'])}). <b>Pick: {escape(j['best'][0]['layout']['description'])}</b>: "
            f"{escape('; '.join(t['reasons']))}.</p><details><summary>the tie group, in conventional order</summary>"
            f"<p>{members}</p></details>")


def pinned_section(j: Dict[str, Any]) -> str:
    if "pinned" not in j:
        return ""
    lines = "".join(f"<li>{escape(line.strip())}</li>" for line in pinned_lines(j))
    return f"<h3>Pinned layout (--layout)</h3><ul>{lines}</ul>"


def memory_table(j: Dict[str, Any]) -> str:
    rows = []
    for i, b in enumerate(j["best"], 1):
        mem = b["memory"]
        fits = '<span class="ok">fits</span>' if mem["fits"] else '<span class="bad">no</span>'
        warn = f'<br><span class="bad">{escape(b["layout"]["batch_warning"])}</span>' if b["layout"]["batch_warning"] \
            else ""
        rows.append((i, escape(b["layout"]["description"]) + warn, f'{b["layout"]["tokens_per_step"]:,}',
                     gib(val(mem["weights"])), gib(val(mem["gradients"])),
                     gib(val(mem["optimizer"])), gib(val(mem["activations"])), gib(val(mem["total"])),
                     gib(val(mem["usable_hbm"])), fits, human_seconds(val(b["step"]["bound"])),
                     human_seconds(val(b["step"]["serial"]))))
    by = j["best"][0]["memory"]["activations_by_recompute"]
    note = ("<p>Activations of layout 1 by recomputation policy: " + ", ".join(
        f"{escape(policy)} {gib(val(f))} GiB" for policy, f in by.items()) + ".</p>")
    return "<h3>Memory fit per GPU (GiB), the pick first, then the tie group</h3>" + note + table(
        ("#", "layout", "tokens per step", "weights", "gradients", "optimizer", "activations", "total", "usable HBM",
         "fit", "step bound", "serial"), rows, numeric=(2, 3, 4, 5, 6, 7, 8))


def estimate_table(j: Dict[str, Any]) -> str:
    groups = sorted({k for b in j["best"] for k in b["estimate"]["exposed"]})
    rows = []
    for i, b in enumerate(j["best"], 1):
        e, st = b["estimate"], b["step"]
        rows.append((i, escape(b["layout"]["description"]), f'{b["layout"]["tokens_per_step"]:,}',
                     human_seconds(val(st["bound"])), human_seconds(val(e["seconds"])), plain(val(e["mfu"]), 2),
                     plain(val(e["gemm_efficiency"]), 2), human_seconds(val(e["bubble"])),
                     *[human_seconds(val(e["exposed"][g])) if g in e["exposed"] else "0" for g in groups]))
    return ("<h3>Efficiency model: the estimate beside the bound</h3><p class=\"note\">The bound assumes every "
            "collective hides behind compute; the estimate charges narrow GEMMs, the pipeline bubble and the "
            "communication each framework leaves exposed (assumptions below). The tie group and its pick come from the "
            "estimate per token.</p>" + table(("#", "layout", "tokens per step", "bound", "estimate", "MFU", "GEMM efficiency",
                                   "bubble", *[f"exposed {g}" for g in groups]), rows,
                                  numeric=tuple(range(2, 8 + len(groups)))))


def step_section(j: Dict[str, Any]) -> str:
    best = j["best"][0]
    st, link = best["step"], j["hardware"]["internode_link"]
    rows = [(f'<span class="swatch" style="background:{color}"></span>{escape(name)}', escape(lane), human_seconds(s))
            for color, name, lane, s in legend(st, link)]
    formulas = [("compute", st["compute"]["formula"]), ("bound", st["bound"]["formula"])]
    formulas += [(x["name"], x["formula"]) for x in st["collectives"]]
    notes = "".join(f"<li><b>{escape(k)}</b>: <code>{escape(v)}</code></li>" for k, v in formulas)
    return (f"<h3>Where one step's time goes ({escape(best['layout']['description'])})</h3>{step_chart(st, link)}"
            + table(("component", "runs on", "seconds per step"), rows, numeric=(2,))
            + f'<details><summary>formulas</summary><ul class="note">{notes}</ul></details>')


def expert_table(j: Dict[str, Any]) -> str:
    if not j.get("expert_parallel"):
        return ""
    rows = [(e["ep"], e["tp"], e["members_per_domain"], f"{e['share_across_domains']:.0%}",
             '<span class="ok">NVLink only</span>' if e["stays_on_nvlink"] else '<span class="bad">crosses EFA</span>',
             human_seconds(e["alltoall_nvlink_s"]), human_seconds(e["alltoall_internode_s"]))
            for e in j["expert_parallel"]]
    return "<h3>Expert all-to-all by expert-parallel degree</h3>" + table(
        ("ep", "tp", "ranks per NVLink domain", "traffic across domains", "where", "NVLink s/step", "EFA s/step"), rows,
        numeric=(0, 1, 2, 3, 5, 6))


def checkpoint_table(j: Dict[str, Any]) -> str:
    ck = j["checkpoint"]
    rows: List[Sequence[Any]] = []
    for t in ck["targets"]:
        if not t["available"]:
            rows.append((escape(t["target"]), "-", "-", "-", escape(t.get("reason", ""))))
            continue
        write = human_seconds(val(t["write"])) + f" ({plain(t['write_steps'], 2)} steps)" if "write" in t \
            else escape(t.get("write_reason", "-"))
        note = escape(t.get("note", "")) + (" <b>unverified rates</b>" if t.get("unverified") else "")
        if t.get("write_bound"):
            note += escape(f"; write {t['write_bound']}; restore {t['restore_bound']}")
        name = t["target"] + (" (comparison)" if t.get("comparison") else "")
        rows.append((escape(name), write, human_seconds(val(t["restore"])), escape(t.get("limited_by", "")), note))
    tier = ck.get("tier")
    chosen = ""
    if tier is not None:
        chosen = "<p>" + "<br>".join(escape(line.strip()) for line in tier_lines(tier)) + "</p>"
    costs = checkpoint_cost_lines(ck)
    if costs:
        chosen += "<p>" + "<br>".join(escape(line.strip()) for line in costs) + "</p>"
    return (f"<h3>Checkpoints: {human_bytes(val(ck['size']))} ({ck['bytes_per_param']} bytes per parameter), "
            "lower bounds</h3>"
            + table(("target", "write", "restore", "limited by", "note"), rows) + chosen)


def data_paragraph(j: Dict[str, Any]) -> str:
    d = j["data_path"]
    need = f"{human_count(val(d['tokens_per_s']))} tokens/s = {human_bytes(val(d['bytes_per_s']))}/s"
    s3 = "".join(f"<p>{escape(line)}.</p>" for line in stream_lines(d))
    judged = verdict_store(d)
    if judged is None:
        return f"<h3>Data path</h3><p>{escape(need)}.</p>{s3}"
    key, short = judged
    if d[key] is None:
        return f"<h3>Data path</h3><p>{escape(need)}; {escape(d['note'])}.</p>{s3}"
    verdict = (f'<span class="ok">{short} delivers it</span>' if d["delivers"]
               else f'<span class="bad">more than {short} delivers</span>')
    return (f"<h3>Data path</h3><p>At the step bound the input pipeline reads {escape(need)}: "
            f"{percent(d[f'share_of_{key}'])} of {short}'s {human_bytes(val(d[key]))}/s. {verdict}.</p>{s3}")


def all_layouts(j: Dict[str, Any]) -> str:
    rows = [(escape(r["layout"]), f'{r["tokens_per_step"]:,}', escape(r["sharding"]), escape(r["recompute"]),
             r["memory_gib"], human_seconds(r["estimate_s"]), plain(r["estimate_mfu"], 2),
             '<span class="ok">yes</span>' if r["fits"] else '<span class="bad">no</span>',
             "yes" if r["in_tie_group"] else "", human_seconds(r["bound_s"]),
             human_seconds(r["serial_s"])) for r in j["layouts"]]
    return (f"<details><summary>all {len(rows)} layouts evaluated</summary>"
            + table(("layout", "tokens per step", "sharding", "recomputation", "GiB per GPU", "estimate", "MFU", "fits",
                     "tie group", "step bound", "serial"), rows, numeric=(1, 4, 5, 6)) + "</details>")


def cost_section(report: Dict[str, Any]) -> str:
    cost = report["cost"]
    rows = [(escape(ln["item"]), escape(ln["detail"]) if ln["instance_type"] is None
             else f"{ln['count']} x {escape(ln['instance_type'])}", escape(ln["capacity"]),
             money(ln["usd_per_hour_each"]) if ln["usd_per_hour_each"] is not None else "not priced",
             money(val(ln["usd_per_hour"])) if "usd_per_hour" in ln else "-",
             money(val(ln["usd_per_month"])) if "usd_per_month" in ln else "-",
             escape("; ".join([ln["price_status"], *ln["notes"]])))
            for ln in cost["lines"]]
    rows.append(("<b>total</b>", "", "", "", f"<b>{money(val(cost['total_usd_per_hour']))}</b>",
                 f"<b>{money(val(cost['total_usd_per_month']))}</b>",
                 "priced lines only" if cost["unpriced"] else "usage not included"))
    tokens = "".join(f"<p>{human_count(j['tokens']['count'])} tokens on {escape(j['group'])}: about "
                     f"{human_seconds(val(j['tokens']['estimate_hours']) * 3600)} at the estimate "
                     f"({human_count(val(j['tokens']['estimate_gpu_hours']))} GPU-hours), at least "
                     f"{human_seconds(val(j['tokens']['hours']) * 3600)} at the step bound, "
                     + (f"{money(val(j['tokens']['usd']))}." if j["tokens"]["usd"] is not None
                        else f"cost unknown: {escape(j['tokens']['usd_reason'])}.") + "</p>"
                     for j in report.get("jobs", []) if j["fits"])
    src = cost["source"]
    excluded = "".join(f"<li>{escape(x)}</li>" for x in cost["not_included"])
    return ("<section><h2>Cost per hour and per month</h2>"
            + table(("item", "what", "capacity", "USD/h each", "USD/h", f"USD/month ({cost['hours_per_month']} h)",
                     "price, notes"), rows, numeric=(3, 4, 5)) + tokens
            + f"<p><b>Not included</b> (billed by usage, per user or per key):</p><ul>{excluded}</ul>"
            + f'<p class="note">Instance prices as of {escape(cost["as_of"])}: {escape(src["page"])}; '
            + f'{escape(src["data"])}. Service prices as of {escape(cost["services_as_of"])}, each line\'s source in '
            + "fmcluster/planner/data/prices.json. "
            + (f'{escape(cost["region_note"])}. ' if cost["region_note"] else "")
            + f'{escape(cost["price_change"])}.</p></section>')


def assumptions_section(report: Dict[str, Any]) -> str:
    fw = report.get("framework")
    conv = [text_framework_line(fw)] if fw else []
    items = conv + report.get("assumptions", []) + ["Cluster all-reduce figures use a gradient of "
                                             f"{plain(report['cluster']['gradient_gb'], 6)} GB (--gradient-gb)."]
    lis = "".join(f"<li>{escape(a)}</li>" for a in items)
    return (f'<section><h2>Assumptions</h2><ul>{lis}</ul><p class="note">Every figure carries its formula and inputs in '
            "<code>fmcluster plan --json</code>; docs/planning.md explains each model and its sources.</p></section>")

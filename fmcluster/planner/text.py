"""The plan as text: the cluster lines `fmcluster plan` always printed, then cost and the job."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from fmcluster.planner import stores
from fmcluster.planner.figures import GIB, human_bytes, human_count, human_seconds, money, percent, plain, val
from fmcluster.planner.stores import KIT, registered, verdict_store

ARROWS = stores.ARROWS  # read by the CLI's synth summary


def render(p: Dict[str, Any]) -> str:
    lines = cluster_lines(p["cluster"]) + cost_lines(p["cost"])
    if "model" in p:
        lines += model_lines(p)
        for j in p["jobs"]:
            lines += job_lines(j, p)
        lines.append("'>=' times are lower bounds, '~' estimates under stated assumptions (see docs/planning.md); --json "
                     "shows every formula and input")
    return "\n".join(lines)


def cluster_lines(c: Dict[str, Any]) -> List[str]:
    t = c["total"]
    lines = [
        f"cluster {c['name']}: {t['nodes']} nodes, {t['gpus']} GPUs, {t['bf16_dense_pflops']} PFLOPS dense BF16 "
        f"({t['fp8_dense_pflops']} FP8), {t['hbm_tib']} TiB HBM, {t['nvlink_domains']} NVLink domains, "
        f"{plain(t['efa_gbps_total'], 6)} Gbps EFA, {t['nvme_tb']} TB local NVMe, {t['ip_addresses']} node IPs "
        f"({t['ip_addresses_with_headroom']} with headroom)",
    ]
    for g in c["groups"]:
        lines.append(
            f"  {g['name']}: {g['nodes']} x {g['instance_type']} = {g['gpus']} {g['gpu']}; "
            f"{g['bf16_dense_pflops']} PFLOPS BF16; {g['hbm_tib']} TiB HBM; "
            f"{g['nvlink_domains']} NVLink domain(s) of {g['nvlink_domain_gpus']} GPUs; "
            f"{g['efa_interfaces_per_node']} EFA/node, {plain(g['efa_gbps_total'], 6)} Gbps EFA in all"
        )
        if g["gpus"]:
            lines.append(
                f"    ring all-reduce of {plain(c['gradient_gb'], 6)} GB (bandwidth bound): "
                f"{g['allreduce_ms_nvlink_domain']} ms inside an NVLink domain, +{g['allreduce_ms_across_efa']} ms across EFA"
            )
        if g["unverified"]:
            lines.append(f"    unverified catalog facts: {', '.join(g['unverified'])}")
    for store in registered():
        summary = c["storage"].get(store.spec_key)
        if summary:
            lines += store.figures().summary_lines(summary, KIT)
    lines += [f"  {line}" for line in c.get("orchestrator_notes", [])]
    return lines




# how each line's price was found, as the line says it
PRICE_MARKS = {"listed": "", "quoted": "", "yours": " (your price)", "estimate": " (estimate)", "unpriced": "",
               "unknown": ""}


def cost_lines(cost: Dict[str, Any]) -> List[str]:
    total = val(cost["total_usd_per_hour"])
    mark = f" ({cost['region_note']})" if cost["region_note"] else (" (some lines are estimates)" if cost["estimate"]
                                                                     else "")
    partial = " for the priced lines" if cost["unpriced"] else ""
    dates = f"prices as of {cost['as_of']} (instances), {cost['services_as_of']} (services)"
    if not any(ln["usd_per_hour_each"] is not None for ln in cost["lines"]):
        lines = [f"cost: no price for any line{mark}, {dates}"]
    else:
        month = f" ({money(val(cost['total_usd_per_month']))} a month of {cost['hours_per_month']} h)"
        lines = [f"cost: {money(total)}/h{month}{partial}{mark}, {dates}"]
        if cost.get("elastic"):
            lines.append(f"  up to {money(val(cost['max_usd_per_hour']))}/h ({money(val(cost['max_usd_per_month']))} a "
                         "month) with every elastic group at max_count")
    for ln in cost["lines"]:
        each = ln["usd_per_hour_each"]
        price = (f"{money(val(ln['usd_per_hour']))}/h ({money(val(ln['usd_per_month']))}/month)"
                 f"{PRICE_MARKS[ln['price_status']]}" if each is not None else "not priced")
        what = ln["detail"] if ln["instance_type"] is None else f"{ln['count']} x {ln['instance_type']}"
        lines.append(f"  {ln['item']}: {what} {price}" + "".join(f"; {n}" for n in ln["notes"]))
    if cost["unpriced"]:
        lines.append(f"  not in the total: {', '.join(cost['unpriced'])}")
    lines.append(f"  not included: {'; '.join(cost['not_included'])}")
    return lines


def model_lines(p: Dict[str, Any]) -> List[str]:
    m, o = p["model"], p["options"]
    moe = f", {m['experts']} experts ({m['active_experts']} active)" if m["experts"] > 1 else ""
    return [f"model {m['name']}: {human_count(m['params'])} parameters ({human_count(m['active_params'])} active){moe}, "
            f"{m['layers']} layers, hidden {m['hidden']}, {m['heads']} heads, seq {m['seq']}; {o['precision']} compute at "
            f"{compute_rates(p)}, {human_count(o['global_batch_tokens'])} tokens per step requested, "
            f"micro-batch {o['micro_batch']}",
            framework_line(p["framework"])]


def compute_rates(p: Dict[str, Any]) -> str:
    """How compute time was priced: the calibrated rates (and what they were calibrated on) or --mfu."""
    o, cal = p["options"], p["calibration"]
    if not o["calibrated"]:
        return f"{plain(o['mfu'], 6)} of peak for every FLOP (--mfu, instead of the calibrated rates)"
    return f"the calibrated rates ({cal['framework']}; estimates within ±{cal['band']:.0%} for 80% of published runs)"


def framework_line(fw: Dict[str, Any]) -> str:
    kinds = "; ".join(f"{s['label']} {s['bytes_per_param']} bytes per parameter, gradients reduced in "
                      f"{'fp32' if s['gradient_wire_bytes'] == 4 else 'bf16'}" for s in fw["shardings"])
    return f"framework {fw['key']}: {fw['label']}: {kinds} (d = data-parallel ranks)"


def hbm_fit(hw: Dict[str, Any]) -> str:
    """The memory a layout must fit, said once the same way everywhere: usable GiB of the GPU's HBM."""
    usable = hw["hbm_gib_per_gpu"] * hw["usable_hbm_fraction"]
    return (f"{usable:.0f} usable GiB of {plain(hw['hbm_gib_per_gpu'], 6)} GiB HBM per GPU "
            f"({hw['usable_hbm_fraction']:.0%})")


def job_lines(j: Dict[str, Any], p: Dict[str, Any]) -> List[str]:
    hw = j["hardware"]
    nvlink = (f"NVLink domain {hw['nvlink_domain_gpus']} GPUs at {plain(hw['nvlink_gb_s_one_way_per_gpu'], 6)} GB/s"
              if hw["nvlink_gb_s_one_way_per_gpu"] else "no NVLink")
    head = (f"job on {j['group']} ({hw['gpus']} x {hw['gpu']}, {nvlink}, {hw['internode_link']} "
            f"{plain(hw['internode_gb_s_per_gpu'], 3)} GB/s per GPU): {j['layouts_fitting']} of {j['layouts_evaluated']} "
            f"layouts fit {hbm_fit(hw)}")
    if not j["fits"]:
        return [head, f"  does not fit: {j['overflow']}"] + pinned_lines(j)
    t = j["ties"]
    lines = [head, f"  tie group: {t['size']} layout(s) the estimate cannot order, within {t['ratio']:.2f}x of the "
                   f"fastest: two estimates each off by up to ±{t['band']:.0%} ({t['band_source']})",
             f"  pick: {j['best'][0]['layout']['description']}: {'; '.join(t['reasons'])}",
             "  layouts, the pick first, then the tie group in conventional order, then the fastest others (estimate "
             "beside the lower bound):"]
    for i, b in enumerate(j["best"], 1):
        mem, st = b["memory"], b["step"]
        lines.append(f"    {i}. {'' if b.get('in_tie_group') else '(outside the tie group) '}"
                     f"{b['layout']['description']}: {val(mem['total']) / GIB:.1f} of "
                     f"{val(mem['usable_hbm']) / GIB:.0f} usable GiB; {b['layout']['tokens_per_step']:,} tokens per step; "
                     f"step ~ {human_seconds(val(b['estimate']['seconds']))} estimated "
                     f"(MFU {plain(val(b['estimate']['mfu']), 2)}), >= {human_seconds(val(st['bound']))} bound; "
                     f"{human_count(val(b['estimate']['tokens_per_s']))} tokens/s estimated")
        if b["layout"]["batch_warning"]:
            lines.append(f"       WARNING: {b['layout']['batch_warning']}")
        lines.append("       estimate: " + estimate_breakdown(b["estimate"]))
        if i == 1:
            lines.append("       bound: " + step_breakdown(st, hw["internode_link"]))
            by = mem["activations_by_recompute"]
            lines.append("       activations per GPU by recomputation: " + ", ".join(
                f"{policy} {val(f) / GIB:.1f} GiB" for policy, f in by.items()))
    lines += pinned_lines(j)
    for e in j.get("expert_parallel", []):
        where = "stays on NVLink" if e["stays_on_nvlink"] else \
            f"{e['share_across_domains']:.0%} of it crosses {hw['internode_link']}"
        net = f"{human_seconds(e['alltoall_internode_s'])} {hw['internode_link']}"
        lines.append(f"  expert all-to-all ep={e['ep']} (tp={e['tp']}): {where}; "
                     f"{human_seconds(e['alltoall_nvlink_s'])} NVLink + {net} per step")
    lines += checkpoint_lines(j["checkpoint"])
    d = j["data_path"]
    per_token = d["bytes_per_s"]["inputs"]["bytes_per_token"]
    data = (f"  data: {human_count(val(d['tokens_per_s']))} tokens/s x {plain(per_token, 6)} B = "
            f"{human_bytes(val(d['bytes_per_s']))}/s")
    judged = verdict_store(d)
    if judged is None:
        lines.append(data)
    elif d[judged[0]] is None:
        lines.append(data + f"; {d['note']}")
    else:
        key, short = judged
        verdict = f"{short} delivers it" if d["delivers"] else f"MORE than {short} delivers"
        lines.append(data + f" = {percent(d[f'share_of_{key}'])} of {short} {human_bytes(val(d[key]))}/s: {verdict}")
    lines += ["  " + line for line in stream_lines(d)]
    t = j["tokens"]
    excludes = f"; without {', '.join(t['usd_excludes'])}" if t.get("usd_excludes") else ""
    usd = (f">= {money(val(t['usd']))} at {money(t['usd']['inputs']['usd_per_hour'])}/h (this group and the shared "
           f"parts{excludes})" if t["usd"] is not None
           else f"cost unknown ({t['usd_reason']})")
    lines.append(f"  {human_count(t['count'])} tokens: ~ {human_seconds(val(t['estimate_hours']) * 3600)} estimated "
                 f"({human_count(val(t['estimate_gpu_hours']))} GPU-hours), >= {human_seconds(val(t['hours']) * 3600)}, "
                 f"{usd}")
    return lines


def pinned_lines(j: Dict[str, Any]) -> List[str]:
    """--layout: the team's layout beside the pick, and what it loses on."""
    pin = j.get("pinned")
    if pin is None:
        return []
    mem, lay = pin["memory"], pin["layout"]
    given = ",".join(f"{k}={v}" for k, v in pin["given"].items())
    head = (f"  pinned layout (--layout {given}): {lay['description']}: {val(mem['total']) / GIB:.1f} of "
            f"{val(mem['usable_hbm']) / GIB:.0f} usable GiB")
    if not mem["fits"]:
        over = (val(mem["total"]) - val(mem["usable_hbm"])) / GIB
        return [head + f": DOES NOT FIT, {over:.1f} GiB over (its smallest footprint; activations by recomputation: "
                + ", ".join(f"{k} {val(f) / GIB:.1f} GiB" for k, f in mem["activations_by_recompute"].items()) + ")"]
    lines = [head + f"; step ~ {human_seconds(val(pin['estimate']['seconds']))} estimated "
                    f"(MFU {plain(val(pin['estimate']['mfu']), 2)}), "
                    f"{human_count(val(pin['estimate']['tokens_per_s']))} tokens/s"]
    vs = pin.get("vs_pick")
    if vs is not None:
        where = "inside the tie group" if vs["in_tie_group"] else "outside the tie group"
        loses = ", ".join(f"{r['term']} {r['share_of_pick']:+.0%}" for r in vs["losses"]) or "nothing the estimate shows"
        lines.append(f"       {vs['slower']:+.0%} per token against the pick {vs['pick']} ({where}); by term, as a share "
                     f"of the pick's time: {loses}")
    lines.append("       estimate: " + estimate_breakdown(pin["estimate"]))
    return lines


def estimate_breakdown(e: Dict[str, Any]) -> str:
    parts = [f"compute {human_seconds(e['seconds']['inputs']['compute_s'])} "
             f"(GEMM efficiency {plain(val(e['gemm_efficiency']), 2)})"]
    if val(e["bubble"]):
        parts.append(f"bubble {human_seconds(val(e['bubble']))}")
    parts += [f"exposed {k} {human_seconds(val(f))}" for k, f in e["exposed"].items() if val(f)]
    return " | ".join(parts)


def step_breakdown(st: Dict[str, Any], internode: str = "EFA") -> str:
    parts = [f"compute {human_seconds(val(st['compute']))}"]
    if val(st["bubble"]):
        parts.append(f"bubble {human_seconds(val(st['bubble']))}")
    for x in st["collectives"]:
        links = [f"{human_seconds(s)} {name}" for name, s in (("NVLink", x["nvlink_s"]), (internode, x["internode_s"])) if s]
        parts.append(f"{x['name']} {' + '.join(links) or '0'}")
    return " | ".join(parts)


def checkpoint_lines(ck: Dict[str, Any]) -> List[str]:
    lines = [f"  checkpoint {human_bytes(val(ck['size']))} ({ck['bytes_per_param']} bytes per parameter):"]
    for t in ck["targets"]:
        if not t["available"]:
            lines.append(f"    {t['target']}: n/a ({t['reason']})")
            continue
        parts = []
        if "write" in t:
            parts.append(f"write {_at_least(t, 'write')} {human_seconds(val(t['write']))} "
                         f"({plain(t['write_steps'], 2)} steps)")
        elif "write_reason" in t:
            parts.append(t["write_reason"])
        parts.append(f"restore {_at_least(t, 'restore')} {human_seconds(val(t['restore']))}")
        if t.get("limited_by"):
            parts.append(f"limited by {t['limited_by']}")
        name = t["target"] + (" (comparison)" if t.get("comparison") else "")
        lines.append(f"    {name}: {', '.join(parts)}" + (" [unverified rates]" if t.get("unverified") else ""))
    return lines + tier_lines(ck.get("tier")) + checkpoint_cost_lines(ck)


def stream_lines(data_path: Dict[str, Any]) -> List[str]:
    """What each store that streams by use says of the data path (its figures' words)."""
    return [line for store in registered() for line in store.figures().stream_lines(data_path, KIT)]


def _at_least(t: Dict[str, Any], what: str) -> str:
    """'>=' for a lower bound; '~' for a time at a documented rate the service may exceed (a store's bound)."""
    return ">=" if str(t.get(f"{what}_bound", "lower bound")).startswith("lower bound") else "~"


def checkpoint_cost_lines(ck: Dict[str, Any]) -> List[str]:
    """What the checkpoints on a store that bills by use cost a month (its figures' words)."""
    return [line for store in registered() for line in store.figures().checkpoint_cost_lines(ck, KIT)]


def tier_lines(tier: Optional[Dict[str, Any]]) -> List[str]:
    """The spec's checkpoint tier (its `checkpoints` section) as deployed: blocking time, restore, cost, room."""
    if tier is None:
        return []
    if not tier["available"]:
        return [f"  spec's tier {tier['tier']}: n/a ({tier['reason']})"]
    w, r = _at_least(tier, "write"), _at_least(tier, "restore")
    head = (f"  spec's tier {tier['tier']}, every {tier['interval_minutes']} min: blocks {w} "
            f"{human_seconds(val(tier['blocking']))} ({percent(val(tier['overhead']))} of the run), durable after {w} "
            f"{human_seconds(val(tier['durable_after']))}, restore on a replaced node {r} "
            f"{human_seconds(val(tier['restore']))} from {tier['restore_reads']}")
    lines = [head + (" [unverified rates]" if tier["unverified"] else "")]
    lines += [f"    {note}" for note in tier.get("notes", [])]
    lost = f"    a failure loses >= {plain(val(tier['lost_per_failure']), 2)} h of training"
    if "usd_per_failure" in tier:
        lost += (f" (${plain(val(tier['usd_per_failure']), 3)}); checkpointing costs "
                 f"${plain(val(tier['usd_per_hour']), 3)}/h")
    lines.append(lost)
    for f in tier["fits"]:
        verdict = "fits" if f["fits"] else "DOES NOT FIT"
        lines.append(f"    {f['where']}: {human_bytes(f['need_bytes'])} needed, {human_bytes(f['have_bytes'])} there: "
                     f"{verdict}")
    return lines

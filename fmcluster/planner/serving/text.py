"""The serving plan as text: one block per deployment (docs/serving.md, "Sizing")."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


def _usd(x: Optional[float]) -> str:
    return "no price" if x is None else f"${x:,.2f}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def render(r: Dict[str, Any]) -> str:
    q = r["request"]
    lines: List[str] = [
        f"serving {r['name']}: {r['model']} on {r['instance_type']} ({r['gpu']}), {r['engine']}, weights {q['weights']}, "
        f"KV cache {q['kv_cache']}",
        f"  request mix: {q['prompt_tokens']} prompt + {q['output_tokens']} output tokens, context {q['context']}, "
        f"{q['requests_per_second']:g} req/s; SLO TTFT {q['ttft_ms']:g} ms, TPOT {q['tpot_ms']:g} ms",
        "  memory per GPU (weights, KV cache, sequences at the context):",
    ]
    for m in r["memory"]:
        fit = "" if m["fits"] else "  does not fit"
        lines.append(f"    tp{m['tensor']}: weights {m['weights_gib_per_gpu']} GiB, KV {m['kv_gib_per_gpu']} GiB "
                     f"({m['kv_kib_per_token_per_gpu']} KiB/token), {m['sequences_at_context']} sequences{fit}")
    lines.append("  bounds: prefill compute (FLOPs) and one decode step at one sequence (HBM bandwidth):")
    for b in r["bounds"]:
        lines.append(f"    tp{b['tensor']}: prefill {b['prefill_flops_per_token'] / 1e9:,.0f} GFLOP/token, "
                     f"{b['prefill_s'] * 1e3:,.0f} ms per prompt; decode {b['decode_step_ms_at_1']} ms per step")
    lines.append("  aggregated (largest concurrency within both SLOs; fewest GPUs first):")
    for a in r["aggregated"] or [None]:
        if a is None:
            lines.append("    none meets the SLOs")
            continue
        lines.append(f"    tp{a['tensor']}: {a['concurrency']} sequences, {a['replica_rps']} req/s and "
                     f"{a['replica_output_tps']:,.0f} output tok/s per replica, TTFT {a['ttft_ms']:,.0f} ms, TPOT "
                     f"{a['tpot_ms']} ms; {_n(a['replicas'], 'replica')} = {a['gpus']} GPUs, "
                     f"{_usd(a['usd_per_million_output_tokens'])} per million output tokens")
    lines.append("  disaggregated (prefill and decode pools, KV cache over EFA):")
    for d in r["disaggregated"] or [None]:
        if d is None:
            lines.append("    none meets the SLOs" if r["choice"]["mode"] else "    none")
            continue
        lines.append(f"    {d['prefills']} x tp{d['prefill_tensor']} prefill + {d['decodes']} x tp{d['decode_tensor']} "
                     f"decode ({d['decode_concurrency']} sequences): TTFT {d['ttft_ms']:,.0f} ms incl. "
                     f"{d['kv_transfer_ms']} ms transfer, TPOT {d['tpot_ms']} ms; {d['gpus']} GPUs, "
                     f"{_usd(d['usd_per_million_output_tokens'])} per million output tokens")
    if "pinned" in r:
        p = r["pinned"]
        verdict = (f"{p['replicas']} replicas = {p['gpus']} GPUs within the SLOs" if p.get("meets_slo") else
                   "does not meet the SLOs" if p["fits"] else "does not fit")
        lines.append(f"  the spec's parallelism tp{p['tensor']} pp{p['pipeline']}: {verdict}")
    c = r["choice"]
    lines.append(f"  choice: {c['mode'] or 'none'}: {c['reason']}")
    if "cold_start" in r:
        s = r["cold_start"]
        read = "unknown" if s["read_s"] is None else f"{s['read_s']:,.0f} s"
        lines.append(f"  cold start: {s['weights_gib']} GiB of weights in {read} from {s['from']}, then the engine's "
                     "start-up")
    lines.append(f"  estimates within ±{r['calibration']['band']:.0%} of published vLLM and SGLang runs for 80% of "
                 f"figures ({r['calibration']['doc']})")
    return "\n".join(lines)

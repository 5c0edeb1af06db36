"""`fmcluster plan --serve`: for a model, a request mix and SLOs on a GPU node group, what a replica holds (weights and
KV cache per GPU, concurrent sequences), its prefill (FLOPs) and decode (HBM bandwidth) bounds per token, the
parallelism that meets the SLOs, the replicas a target rate needs, aggregated against disaggregated with the reason,
the cost per million output tokens and the weights' cold start (docs/serving.md). The formulas are
fmcluster/spec/serving_sizing.py's, the ones the spec and the Kubernetes kinds use; the calibration's band is quoted."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from fmcluster.planner import cost
from fmcluster.planner.serving.calibration import ERROR_BAND
from fmcluster.spec import serving_models, serving_sizing
from fmcluster.spec.serving_sizing import Replica

GIB = 2**30
# Where weights are read from at a replica's start, and at what rate (bytes/s) one node reads them.
# Amazon S3: "up to 100 Gb/s" to one instance with parallel requests ("Performance design patterns for Amazon S3",
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance-design-patterns.html), what a streaming
# loader (Run:ai Model Streamer) or Mountpoint reaches with enough concurrency.
S3_NODE_BYTES_S = 100e9 / 8


@dataclass(frozen=True)
class Request:
    """What to size: a model on one GPU node group, its request mix and SLOs."""

    name: str
    architecture: str
    instance_type: str
    region: str
    weights: str = "bf16"
    kv: str = "bf16"
    prompt: int = 2000
    output: int = 500
    context: int = 0  # 0: prompt + output
    rate: float = 1.0
    ttft_ms: float = 2000.0
    tpot_ms: float = 50.0
    engine: str = "vllm"
    source: str = "s3"  # s3 | file_system (a directory on the shared file system, or a hub model staged there)
    file_system: str = ""  # the shared file system's store, by its title
    file_system_bytes_s: float = 0.0  # its read throughput, when source is file_system
    efa: bool = True
    pinned: Optional[Dict[str, int]] = None  # the spec's parallelism {tensor, pipeline}, evaluated beside the pick

    @property
    def max_context(self) -> int:
        return self.context or self.prompt + self.output


def _gib(x: float) -> float:
    return round(x / GIB, 2)


def _memory(r: Replica, req: Request) -> Dict[str, Any]:
    return {"tensor": r.tp, "pipeline": r.pp, "gpus": r.gpus, "weights_gib_per_gpu": _gib(r.weight_bytes_per_gpu),
            "kv_kib_per_token_per_gpu": round(r.kv_bytes_per_token_per_gpu / 1024, 1),
            "kv_gib_per_gpu": _gib(max(r.kv_bytes_per_gpu, 0)), "kv_tokens": r.kv_tokens,
            "sequences_at_context": r.sequences(req.max_context), "fits": r.fits(req.max_context)}


def _bounds(r: Replica, req: Request) -> Dict[str, Any]:
    a = r.arch
    flops_token = 2 * a.active + a.layers * a.attention_width * req.prompt  # mean over a causal prompt
    return {"tensor": r.tp, "prefill_flops_per_token": flops_token, "prefill_s": round(r.prefill_s(req.prompt), 4),
            "decode_bytes_per_step_per_gpu_at_1": round(r.weight_bytes_per_gpu + req.max_context *
                                                        r.kv_bytes_per_token_per_gpu),
            "decode_step_ms_at_1": round(r.decode_step_s(1, req.max_context) * 1e3, 2)}


def _hourly(req: Request) -> Optional[float]:
    price, _ = cost.hourly(req.instance_type, req.region)
    return None if price is None else price / serving_sizing.gpu(req.instance_type).per_node


def _per_million(gpus: int, req: Request, output_tps: float) -> Optional[float]:
    per_gpu = _hourly(req)
    if per_gpu is None or output_tps <= 0:
        return None
    return round(gpus * per_gpu / (output_tps * 3600 / 1e6), 3)


def _cold_start(r: Replica, req: Request) -> Dict[str, Any]:
    """Seconds to read one replica's weights: from S3 at each node's share, or from the shared file system at its
    throughput (all replicas starting at once share it); engine start-up (compilation, CUDA graphs) comes on top."""
    nbytes = r.weight_bytes
    if req.source == "file_system":
        rate, how = (req.file_system_bytes_s, f"the {req.file_system} file system's throughput (shared by replicas "
                                              "starting together)")
    else:
        rate, how = S3_NODE_BYTES_S * r.nodes, f"S3 at 100 Gb/s per node x {r.nodes} node(s)"
    seconds = nbytes / rate if rate > 0 else None
    return {"weights_gib": _gib(nbytes), "read_s": None if seconds is None else round(seconds, 1), "from": how}


def plan(req: Request) -> Dict[str, Any]:
    arch = serving_models.get(req.architecture)
    hw = serving_sizing.gpu(req.instance_type)
    layouts = serving_sizing.layouts(arch, hw, req.weights, req.kv)
    ttft_s, tpot_s = req.ttft_ms / 1e3, req.tpot_ms / 1e3
    agg = serving_sizing.aggregated(layouts, req.prompt, req.output, req.rate, ttft_s, tpot_s)
    dis = serving_sizing.disaggregated(layouts, layouts, req.prompt, req.output, req.rate, ttft_s, tpot_s) if req.efa \
        else []
    report: Dict[str, Any] = {
        "name": req.name, "model": arch.name, "model_sources": list(arch.sources), "instance_type": req.instance_type,
        "gpu": hw.name, "engine": req.engine,
        "request": {"prompt_tokens": req.prompt, "output_tokens": req.output, "context": req.max_context,
                    "requests_per_second": req.rate, "ttft_ms": req.ttft_ms, "tpot_ms": req.tpot_ms,
                    "weights": req.weights, "kv_cache": req.kv},
        "memory": [_memory(r, req) for r in layouts],
        "bounds": [_bounds(r, req) for r in layouts if r.fits(req.max_context)],
        "aggregated": [_agg(s, req) for s in agg],
        "disaggregated": [_dis(s, req) for s in dis[:5]],
        "calibration": {"band": ERROR_BAND, "doc": "docs/serving.md#calibration"},
    }
    if req.pinned:
        r = Replica(arch, hw, req.pinned.get("tensor", 1), req.pinned.get("pipeline", 1), req.weights, req.kv)
        load = serving_sizing.operating_point(r, req.prompt, req.output, ttft_s, tpot_s) if r.fits(req.max_context) \
            else None
        report["pinned"] = {**_memory(r, req), "meets_slo": load is not None,
                            **({} if load is None else _agg(serving_sizing.Sized(r, load, max(1, math.ceil(
                                req.rate / load.rate))), req))}
    report["choice"] = _choice(agg, dis, req)
    pick = agg[0].replica if agg else next((r for r in layouts if r.fits(req.max_context)), None)
    if pick is not None:
        report["cold_start"] = _cold_start(pick, req)
    return report


def _agg(s: serving_sizing.Sized, req: Request) -> Dict[str, Any]:
    ld = s.load
    return {"tensor": s.replica.tp, "pipeline": s.replica.pp, "gpus_per_replica": s.replica.gpus,
            "concurrency": int(ld.concurrency), "capacity": ld.capacity, "replica_rps": round(ld.rate, 3),
            "replica_output_tps": round(ld.output_tps, 1), "ttft_ms": round(ld.ttft_s * 1e3, 1),
            "tpot_ms": round(ld.tpot_s * 1e3, 2), "replicas": s.replicas, "gpus": s.gpus,
            "usd_per_million_output_tokens": _per_million(s.gpus, req, req.rate * req.output)}


def _dis(s: serving_sizing.Disaggregated, req: Request) -> Dict[str, Any]:
    return {"prefill_tensor": s.prefill.tp, "prefills": s.prefills, "decode_tensor": s.decode.tp,
            "decodes": s.decodes, "decode_concurrency": int(s.decode_load.concurrency),
            "ttft_ms": round(s.ttft_s * 1e3, 1), "kv_transfer_ms": round(s.transfer_s * 1e3, 2),
            "tpot_ms": round(s.decode_load.step_s * 1e3, 2), "gpus": s.gpus,
            "usd_per_million_output_tokens": _per_million(s.gpus, req, req.rate * req.output)}


def _choice(agg: List[serving_sizing.Sized], dis: List[serving_sizing.Disaggregated], req: Request) -> Dict[str, Any]:
    """Aggregated against disaggregated, with the reason in one line."""
    if not agg and not dis:
        return {"mode": None, "reason": f"no layout on one {req.instance_type} node meets TTFT {req.ttft_ms:g} ms and "
                                        f"TPOT {req.tpot_ms:g} ms for this mix: relax the SLOs, use fp8, or a larger "
                                        "GPU"}
    if not req.efa:
        return {"mode": "aggregated", "reason": "the node group has no EFA, which disaggregation needs for the KV "
                                                "cache"}
    if not dis:
        return {"mode": "aggregated", "reason": "no prefill/decode split meets the TTFT SLO with the KV transfer"}
    if not agg:
        return {"mode": "disaggregated", "reason": "no aggregated replica meets the SLOs: prefill chunks sharing its "
                                                   "steps push TPOT past the SLO, which separate decode workers avoid"}
    a, d = agg[0], dis[0]
    if d.gpus < a.gpus:
        return {"mode": "disaggregated",
                "reason": f"{d.gpus} GPUs against {a.gpus}: aggregated replicas must stay at {int(a.load.concurrency)} "
                          f"sequences so that prefills sharing their steps keep TPOT within {req.tpot_ms:g} ms, while "
                          f"decode-only replicas run {int(d.decode_load.concurrency)}; the KV cache crosses EFA in "
                          f"{d.transfer_s * 1e3:.1f} ms"}
    return {"mode": "aggregated",
            "reason": f"{a.gpus} GPUs against {d.gpus} for disaggregated: at this mix the prefills fit beside the "
                      f"decodes within the SLOs, and one pool is simpler to run and scale"}

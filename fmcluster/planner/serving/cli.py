"""`fmcluster plan SPEC --serve`: the serving plan of each deployment of the spec's `serving` section, or of one model
given by the options (`--model` an architecture, the request mix and SLOs). Bad options raise PlanUsageError (exit 2)."""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Optional

from fmcluster.planner.errors import PlanUsageError
from fmcluster.planner.options import number

OPTIONS = ("prompt_tokens", "output_tokens", "context", "rate", "ttft_ms", "tpot_ms", "kv_cache")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    s = parser.add_argument_group("serving (--serve: size inference replicas instead of a training job)")
    s.add_argument("--serve", action="store_true",
                   help="plan serving: each deployment of the spec's serving section, or --model (an architecture: "
                        "llama3.1-70b, qwen3-32b, deepseek-r1, ...) on --group with the options below")
    s.add_argument("--prompt-tokens", help="mean prompt tokens (default 2000)")
    s.add_argument("--output-tokens", help="mean output tokens (default 500)")
    s.add_argument("--context", help="the engine's max model length (default prompt + output)")
    s.add_argument("--rate", help="requests per second to serve (default 1)")
    s.add_argument("--ttft-ms", help="time-to-first-token SLO, ms (default 2000)")
    s.add_argument("--tpot-ms", help="time-per-output-token SLO, ms (default 50)")
    s.add_argument("--kv-cache", metavar="{auto,fp8}", help="KV cache precision (default auto: 16-bit)")


def _given(args: Any) -> List[str]:
    return [o for o in OPTIONS if getattr(args, o, None) is not None]


def requests(args: Any, spec: Any) -> List[Any]:
    from fmcluster.planner.serving.plan import Request
    from fmcluster.spec import serving_models

    if args.model is None:
        if spec.serving is None:
            raise PlanUsageError("--serve: the spec has no serving section; give --model (an architecture) and the "
                                 "request mix")
        if _given(args):
            flag = "--" + _given(args)[0].replace("_", "-")
            raise PlanUsageError(f"{flag}: the spec's serving section sets the request mix; give --model to plan "
                                 "another")
        return [_from_deployment(d, spec) for d in spec.serving.models
                if args.group is None or d.node_group == args.group]
    if args.model not in serving_models.names():
        raise PlanUsageError(f"--model: {args.model!r} is not a serving architecture: "
                             f"{', '.join(serving_models.names())}")
    groups = [g for g in spec.gpu_groups if args.group is None or g.name == args.group]
    if not groups:
        raise PlanUsageError(f"--group: {args.group!r} is not a GPU node group of the spec")
    if args.precision not in ("bf16", "fp8"):
        raise PlanUsageError(f"--precision: {args.precision!r}: bf16 or fp8 weights")
    kv = args.kv_cache or "auto"
    if kv not in ("auto", "fp8"):
        raise PlanUsageError(f"--kv-cache: {kv!r}: auto or fp8")
    g = groups[0]
    return [Request(
        name=args.model, architecture=args.model, instance_type=g.instance_type, region=spec.region,
        weights=args.precision, kv="fp8" if kv == "fp8" else "bf16",
        prompt=int(number(args, "prompt_tokens", integer=True) or 2000),
        output=int(number(args, "output_tokens", integer=True) or 500),
        context=int(number(args, "context", integer=True) or 0), rate=float(number(args, "rate") or 1.0),
        ttft_ms=float(number(args, "ttft_ms") or 2000), tpot_ms=float(number(args, "tpot_ms") or 50),
        efa=bool(g.efa_enabled), **_weights_from(spec, on_file_system=True))]


def _weights_from(spec: Any, *, on_file_system: bool) -> Dict[str, Any]:
    """Where the weights are read from (the shared file system where the spec has one and they are on it, else S3)
    and at what rate: the file system's read throughput, as its store's section gives it."""
    found = spec.storage.file_system()
    if found is None or not on_file_system:
        return {"source": "s3"}
    _, section = found
    return {"source": "file_system", "file_system": section.title,
            "file_system_bytes_s": section.read_bytes_per_s() or 0.0}


def _from_deployment(d: Any, spec: Any) -> Any:
    from fmcluster.planner.serving.plan import Request

    group = next(g for g in spec.node_groups if g.name == d.node_group)
    pinned: Optional[Dict[str, int]] = None
    par = d.parallelism if d.mode == "aggregated" else None
    if par is not None and par != "plan":
        pinned = {"tensor": par.tensor, "pipeline": par.pipeline}
    w = d.workload
    return Request(name=d.name, architecture=d.architecture, instance_type=group.instance_type, region=spec.region,
                   weights=d.precision, kv=d.kv, prompt=w.prompt_tokens, output=w.output_tokens,
                   context=w.context or 0, rate=w.requests_per_second, ttft_ms=d.slo.ttft_ms, tpot_ms=d.slo.tpot_ms,
                   engine=d.engine, efa=bool(group.efa_enabled), pinned=pinned,
                   **_weights_from(spec, on_file_system=d.file_system_path() is not None))


def run(args: Any) -> int:
    from fmcluster.planner.serving.plan import plan
    from fmcluster.planner.serving.text import render
    from fmcluster.registry import load_spec

    spec = load_spec(args.file)
    reports = [plan(r) for r in requests(args, spec)]
    if args.json:
        print(json.dumps({"serving": reports}, indent=2))
    else:
        print("\n\n".join(render(r) for r in reports))
    return 0

"""`fmcluster plan` and `fmcluster diagram`: arguments and runners the main CLI wires in.

Bad options raise `PlanUsageError` (its message starts with the option's name; the CLI
exits 2); a bad spec raises the spec's own `SpecError`. `python -m fmcluster.planner.cli`
runs both commands stand-alone, with the same exit codes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from fmcluster.outputs import marker
from fmcluster.outputs.write import Output, OutputRefused, claim, write
from fmcluster.planner.errors import PlanUsageError
from fmcluster.planner.options import number

__all__ = ["PlanUsageError", "add_plan_arguments", "run_plan", "add_diagram_arguments", "run_diagram", "main"]

SIZE_FLAGS = ("params", "layers", "hidden", "experts", "active_experts")
# argparse reads "-5B" as an option unless it looks like a negative number: count suffixes and exponents make it one,
# so `--params -5B` reaches the documented "--params: must be greater than 0" instead of "expected one argument".
NEGATIVE_COUNT = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[kKmMbBgGtT]?$")
# How each diagram format carries fmcluster's mark (outputs/marker.py): a PDF has no place for one.
DIAGRAM_STYLES: Dict[str, marker.Style] = {"svg": marker.XML, "png": marker.PNG, "pdf": None, "dot": marker.DOT,
                                           "gv": marker.DOT}


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser._negative_number_matcher = NEGATIVE_COUNT  # type: ignore[attr-defined]  # see NEGATIVE_COUNT
    parser.add_argument("file", help="the cluster spec (YAML)")
    m = parser.add_argument_group("model (optional: without one, plan prints the cluster figures and cost)")
    m.add_argument("--model", help="a preset (llama3.1-8b, llama3-70b, mixtral-8x7b, deepseek-v3, ...) or a YAML/JSON file")
    m.add_argument("--params", help="total parameters, e.g. 70e9 or 70B")
    m.add_argument("--layers", help="transformer layers")
    m.add_argument("--hidden", help="hidden size")
    m.add_argument("--heads", help="attention heads, dividing --hidden (default hidden / 128; model files may give "
                   "head_dim)")
    m.add_argument("--vocab", help="vocabulary size: embedding and output layer memory, logits, FLOPs (default: none; "
                   "the report says what is then left out)")
    m.add_argument("--seq", help="sequence length (overrides the preset's; default 4096 with explicit sizes)")
    m.add_argument("--experts", help="experts per MoE layer")
    m.add_argument("--active-experts", help="experts each token is routed to (top-k)")
    t = parser.add_argument_group("training")
    t.add_argument("--precision", default="bf16", metavar="{bf16,fp8}",
                   help="compute precision: the GEMMs run at its dense peak, attention at BF16's (default bf16)")
    t.add_argument("--framework", default="megatron", metavar="{megatron,fsdp,deepspeed}",
                   help="whose bytes per parameter and gradient precision: Megatron-LM/NeMo (18, or 6 + 12/d with the "
                   "distributed optimizer; fp32 gradients), PyTorch FSDP2 (16/d) or DeepSpeed ZeRO (16 .. 16/d; bf16 "
                   "gradients). Default megatron")
    t.add_argument("--mfu", help="fraction (0, 1] of the dense peak every FLOP runs at, instead of the calibrated rates "
                   "(docs/planning.md, Calibration); full recomputation's extra forward pass runs at the same rate, so "
                   "there it is hardware FLOPs utilization (default: the calibrated rates of the framework and precision)")
    t.add_argument("--global-batch-tokens", default="4194304", help="tokens per optimizer step (default 4M = 2^22)")
    t.add_argument("--micro-batch", default="1", help="sequences per micro-batch (default 1)")
    t.add_argument("--tokens", default="1T", help="tokens to train, for time and cost (default 1T)")
    t.add_argument("--bytes-per-token", default="4", help="bytes per token the data path reads (default 4: uint32 ids)")
    t.add_argument("--group", help="plan the job on this GPU node group only (default: each GPU group)")
    t.add_argument("--top", default="5", help="layouts to show in full: the tie group's pick first (default 5)")
    t.add_argument("--layout", metavar="tp=8,pp=16,vp=8,cp=1,dp=64,ep=1",
                   help="evaluate this layout too (the one a team already runs): its memory, step time and where it loses "
                   "to the tie group's pick; dp follows from the GPUs when left out")
    t.add_argument("--recompute", metavar="{none,selective,full}",
                   help="the pinned layout's activation recomputation (default: the fastest that fits)")
    parser.add_argument("--price", action="append", metavar="GROUP=USD",
                        help="what one instance-hour of GROUP's reservation costs you (a Capacity Block's or training "
                             "plan's effective hourly rate; repeatable); without it such a group is left unpriced")
    parser.add_argument("--gradient-gb", default="14", help="gradient size for the cluster all-reduce figures (GB)")
    parser.add_argument("--json", action="store_true", help="every figure with its formula and inputs")
    parser.add_argument("--html", metavar="OUT", help="write one self-contained HTML page (tables, diagram, step chart)")
    parser.add_argument("--force", action="store_true", help="replace the output file even when fmcluster did not "
                        "write it or it was edited since (never the spec)")
    from fmcluster.planner.serving import cli as serving_cli

    serving_cli.add_arguments(parser)

    from fmcluster.planner import rl_cli  # plan --rl: a post-training step; last, it keeps the others' defaults

    rl_cli.add_arguments(parser)


def add_diagram_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the cluster spec (YAML)")
    parser.add_argument("--out", required=True, help="output file: .svg, .png, .pdf, or .dot/.gv for the Graphviz source")
    parser.add_argument("--force", action="store_true", help="replace --out even when fmcluster did not write it or it "
                        "was edited since (a PDF carries no mark: an existing one is replaced only with --force)")


def fraction(args: Any, name: str, default: float) -> float:
    value = number(args, name)
    if value is None:
        return default
    if value > 1:
        raise PlanUsageError(f"--{name}: {getattr(args, name)} is not a fraction: give the share of peak between 0 and 1 "
                             f"(0.4 for 40%)")
    return value


def resolve_model(args: Any) -> Any:
    from fmcluster.planner import models

    sizes = {k: number(args, k, integer=k != "params") for k in SIZE_FLAGS}
    heads, seq = number(args, "heads", integer=True), number(args, "seq", integer=True)
    vocab = number(args, "vocab", integer=True)
    given = [k for k, v in sizes.items() if v is not None]
    if args.model is not None:
        if given or heads is not None or vocab is not None:
            flag = "--" + (given[0] if given else "heads" if heads is not None else "vocab").replace("_", "-")
            raise PlanUsageError(f"{flag}: give either --model or the explicit sizes, not both (--seq may override)")
        model = models.resolve(args.model)
        return models.with_seq(model, int(seq)) if seq else model
    if not given and heads is None and vocab is None:
        if seq is not None:
            raise PlanUsageError("--seq: needs --model or the explicit sizes (--params --layers --hidden)")
        return None
    for k in ("params", "layers", "hidden"):
        if sizes[k] is None:
            raise PlanUsageError(f"--{k}: required with the explicit sizes (--params, --layers and --hidden)")
    if (sizes["experts"] is None) != (sizes["active_experts"] is None):
        missing = "--experts" if sizes["experts"] is None else "--active-experts"
        raise PlanUsageError(f"{missing}: --experts and --active-experts go together")
    raw: Dict[str, Any] = {k: (v if k == "params" else int(v)) for k, v in sizes.items() if v is not None}
    if heads:
        if raw["hidden"] % int(heads):
            raise PlanUsageError(f"--heads: {int(heads)} does not divide --hidden {raw['hidden']}; the head size is "
                                 "hidden / heads")
        raw["heads"] = int(heads)
    if vocab:
        raw["vocab"] = int(vocab)
    if seq:
        raw["seq"] = int(seq)
    option = "--active-experts" if raw.get("active_experts", 0) > raw.get("experts", 1 << 60) else "--params"
    raw["name"] = "custom"
    return models.build(raw, option)


def reservation_prices(given: List[str], spec: Any) -> Dict[str, float]:
    """--price GROUP=USD, each for a node group of the spec, a positive number of dollars per instance-hour."""
    groups = [g.name for g in spec.node_groups]
    out: Dict[str, float] = {}
    for item in given:
        name, sep, raw = item.partition("=")
        if not sep or name not in groups:
            raise PlanUsageError(f"--price: {item!r}: give GROUP=USD with GROUP one of {', '.join(groups)}")
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not 0 < value < float("inf"):
            raise PlanUsageError(f"--price: {item!r}: USD per instance-hour, a number greater than 0")
        out[name] = value
    return out


def _claim(path: str, option: str, style: marker.Style, args: Any) -> Output:
    try:
        return claim(path, option, style, force=getattr(args, "force", False), spec=args.file)
    except OutputRefused as e:
        raise PlanUsageError(str(e)) from None


def _write(out: Output, data: bytes) -> None:
    try:
        write(out, data)
    except OutputRefused as e:
        raise PlanUsageError(str(e)) from None


def run_plan(args: Any) -> int:
    from fmcluster.planner import rl_cli

    if getattr(args, "serve", False) and getattr(args, "rl", False):
        raise PlanUsageError("--serve and --rl: one plan at a time (serving sizes replicas, --rl one post-training step)")
    if getattr(args, "serve", False):
        from fmcluster.planner.serving import cli as serving_cli

        return serving_cli.run(args)
    if getattr(args, "rl", False):
        return rl_cli.run(args)
    from fmcluster.planner.frameworks import framework
    from fmcluster.planner.pinned import check_recompute, parse_layout
    from fmcluster.planner.report import PlanOptions, build
    from fmcluster.registry import load_spec

    rl_cli.refuse_rl_options(args)
    layout = getattr(args, "layout", None)
    recompute = check_recompute(getattr(args, "recompute", None))
    if recompute is not None and layout is None:
        raise PlanUsageError("--recompute: applies to a pinned layout; give --layout too")
    mfu_given = getattr(args, "mfu", None) is not None
    opts = PlanOptions(
        precision=args.precision, mfu=fraction(args, "mfu", 0.4) if mfu_given else None, calibrated=not mfu_given,
        layout=parse_layout(layout) if layout is not None else None, recompute=recompute,
        global_batch_tokens=float(number(args, "global_batch_tokens") or 0),
        micro_batch=int(number(args, "micro_batch", integer=True) or 1), tokens=float(number(args, "tokens") or 0),
        bytes_per_token=float(number(args, "bytes_per_token") or 0), gradient_gb=float(number(args, "gradient_gb") or 0),
        group=args.group, top=int(number(args, "top", integer=True) or 5),
        model_option="--model" if args.model is not None else "--params",
        framework=framework(getattr(args, "framework", None) or "megatron").key,
    )
    model = resolve_model(args)
    html_out = _claim(args.html, "--html", marker.XML, args) if args.html else None
    spec = load_spec(args.file)
    opts.reservation_prices = reservation_prices(getattr(args, "price", None) or [], spec)
    report = build(spec, model, opts)
    if html_out is not None:
        from fmcluster.planner.html import page

        _write(html_out, page(report, spec).encode("utf-8"))
        print(f"wrote {args.html}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        from fmcluster.planner.text import render

        print(render(report))
    return 0


def run_diagram(args: Any) -> int:
    from fmcluster.planner.diagram import DiagramUnavailable, file_bytes
    from fmcluster.registry import load_spec

    out = Path(args.out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in DIAGRAM_STYLES:
        raise PlanUsageError(f"--out: {out.name} needs a .svg, .png, .pdf, .dot or .gv suffix")
    target = _claim(args.out, "--out", DIAGRAM_STYLES[fmt], args)
    spec = load_spec(args.file)
    try:
        data = file_bytes(spec, fmt)
    except DiagramUnavailable as e:
        print(f"fmcluster diagram: {e}", file=sys.stderr)
        return 1
    _write(target, data)
    print(f"wrote {out}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="fmcluster", description="Capacity planner: plan and diagram.")
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="memory fit, step-time bounds, checkpoints, data path and cost")
    add_plan_arguments(plan)
    plan.set_defaults(func=run_plan)
    diagram = sub.add_parser("diagram", help="draw the cluster (node groups, NVLink domains, EFA, shared stores, S3, AMP)")
    add_diagram_arguments(diagram)
    diagram.set_defaults(func=run_diagram)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except PlanUsageError as e:
        print(f"fmcluster: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head`: the reader left, nothing to report
        return 0
    except Exception as e:  # the spec's SpecError: one `field.path: problem` line each
        problems = getattr(e, "problems", None)
        if problems is None:
            raise
        for line in problems:
            print(line, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

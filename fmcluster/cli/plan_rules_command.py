"""`fmcluster plan-rules SPEC --model ...`: the plan's bound as Prometheus recording rules (fmcluster.plan), for the
job dashboard. The planner's own arguments and report; --out is judged before planning and written whole
(fmcluster.outputs)."""

from __future__ import annotations

import argparse
from typing import Any

from fmcluster.cli.errors import EXIT_OK, UsageError


def cmd_plan_rules(args: argparse.Namespace) -> int:
    import yaml

    from fmcluster.acceptance.plan_rules import rule_groups
    from fmcluster.outputs import marker
    from fmcluster.outputs.write import claim
    from fmcluster.planner.cli import PlanUsageError, number, resolve_model
    from fmcluster.planner.report import PlanOptions, build
    from fmcluster.planner.rl_cli import refuse_rl_options
    from fmcluster.registry import load_spec

    out = claim(args.out, "--out", marker.HASH, force=args.force, spec=args.file) if args.out else None
    if getattr(args, "rl", False):
        return _write(out, args, _rl_text(args))
    try:
        refuse_rl_options(args)
        model = resolve_model(args)
        if model is None:
            raise PlanUsageError("--model: plan-rules needs a model (--model or --params/--layers/--hidden)")
        mfu = number(args, "mfu", upper=1.0)  # given: it replaces the calibrated rates, as in `plan`
        opts = PlanOptions(
            precision=args.precision, mfu=float(mfu) if mfu else None, calibrated=not mfu,
            global_batch_tokens=float(number(args, "global_batch_tokens") or 0),
            micro_batch=int(number(args, "micro_batch", integer=True) or 1), tokens=float(number(args, "tokens") or 0),
            bytes_per_token=float(number(args, "bytes_per_token") or 0),
            gradient_gb=float(number(args, "gradient_gb") or 0), group=args.group, top=1,
            model_option="--model" if args.model is not None else "--params")
        spec = load_spec(args.file)
        report = build(spec, model, opts)
    except PlanUsageError as e:
        raise UsageError(str(e)) from None
    text = ("# fmcluster plan-rules: the plan's bound per GPU node group (docs/observability.md, \"Job dashboard and the "
            "plan's bound\")\n" + yaml.safe_dump(rule_groups(spec, report), sort_keys=False, width=120))
    return _write(out, args, text)


def _rl_text(args: argparse.Namespace) -> str:
    """`plan-rules --rl`: the RL plan of each GPU group (planner/rl_cli.py) as recording rules."""
    import yaml

    from fmcluster.acceptance.plan_rules import rl_rule_groups
    from fmcluster.planner.cli import PlanUsageError
    from fmcluster.planner.rl_cli import plan_groups, refuse_training_options
    from fmcluster.registry import load_spec

    try:
        refuse_training_options(args)
        spec = load_spec(args.file)
        plans = plan_groups(spec, args)
    except PlanUsageError as e:
        raise UsageError(str(e)) from None
    return ("# fmcluster plan-rules --rl: the RL plan's step per GPU node group (docs/post-training.md, \"Telemetry\")\n"
            + yaml.safe_dump(rl_rule_groups(spec, plans), sort_keys=False, width=120))


def _write(out: Any, args: argparse.Namespace, text: str) -> int:
    from fmcluster.outputs.write import emit

    emit(text, out, args.out)
    return EXIT_OK


def register(sub: argparse._SubParsersAction[Any]) -> None:
    from fmcluster.planner.cli import add_plan_arguments

    help_ = ("The plan's bound (tokens/s, MFU, GPUs of the fastest fitting layout per GPU group) as Prometheus "
             "recording rules for the job dashboard; the plan's model and training options.")
    sp = sub.add_parser("plan-rules", help=help_, description=help_)
    sp.set_defaults(func=cmd_plan_rules)
    add_plan_arguments(sp)
    sp.add_argument("--out", help="write the rule file here (default: standard output); with --force even over a file "
                    "fmcluster did not write")

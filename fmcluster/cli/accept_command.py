"""`fmcluster accept LOG`: judge an nccl-tests log against the fabric model and published results, and say which of
the group's nodes it tested (docs/observability.md, "Fabric acceptance"). Exit 0: every run passed (or warned,
without --strict); 1: a run failed (or, with --strict, warned or left a node of the group untested); 2: bad input
(an unreadable log, no nccl-tests run in it, options that do not fit)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, List, Optional, Tuple

from fmcluster.cli.errors import EXIT_FAILED, EXIT_OK, UsageError

MAX_LOG_BYTES = 64 * 2**20


def _read(path: str) -> str:
    p = Path(path)
    try:
        if p.stat().st_size > MAX_LOG_BYTES:
            raise UsageError(f"LOG: {path} is larger than {MAX_LOG_BYTES // 2**20} MiB: not one nccl-tests log")
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise UsageError(f"LOG: cannot read {path} ({e.strerror or e})") from None


def _fraction(args: Any, name: str) -> float:
    raw = getattr(args, name)
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"--{name.replace('_', '-')}: {raw!r} is not a number") from None
    if not 0 < value <= 2:
        raise UsageError(f"--{name.replace('_', '-')}: must be greater than 0 and at most 2 (a share of the reference)")
    return value


def _group(args: Any) -> Tuple[Optional[Any], Optional[str]]:
    """(the spec's node group or None, instance type or None)."""
    if args.spec is None:
        if args.group:
            raise UsageError("--group: needs --spec")
        return None, args.instance_type
    from fmcluster.registry import load_spec

    spec = load_spec(args.spec)
    gpu = [g for g in spec.node_groups if g.instance.gpus > 0]
    if args.group:
        found = [g for g in spec.node_groups if g.name == args.group]
        if not found or found[0].instance.gpus == 0:
            raise UsageError(f"--group: {args.group!r} is not a GPU node group of {args.spec} "
                             f"(GPU groups: {', '.join(g.name for g in gpu) or 'none'})")
        group = found[0]
    elif len(gpu) == 1:
        group = gpu[0]
    else:
        raise UsageError(f"--group: {args.spec} has {len(gpu)} GPU node groups; name one "
                         f"({', '.join(g.name for g in gpu) or 'none'})")
    if args.instance_type and args.instance_type.removeprefix("ml.") != group.instance_type.removeprefix("ml."):
        raise UsageError(f"--instance-type: {args.instance_type} differs from group {group.name}'s {group.instance_type}")
    return group, group.instance_type


def _instance(group: Optional[Any], instance_type: Optional[str]) -> Optional[Any]:
    """The instance facts the fabric model reads: the group's, or the catalog's for --instance-type (None: unknown)."""
    if group is not None:
        return group.instance
    from fmcluster import catalog

    try:
        return catalog.get(instance_type.removeprefix("ml.")) if instance_type else None
    except KeyError:
        return None


def cmd_accept(args: argparse.Namespace) -> int:
    from fmcluster.acceptance import coverage, fabric_model, nccl_output, serve_output, verdict
    from fmcluster.acceptance.bound import BUS_FACTOR, plan_bound

    text = _read(args.log)
    if serve_output.looks_like(text):  # a serving load test (`fmcluster job serve`), not nccl-tests
        from fmcluster.cli import serve_accept

        return serve_accept.run(args, text)

    thresholds = verdict.Thresholds(warn_below=_fraction(args, "warn_below"), fail_below=_fraction(args, "fail_below"))
    if thresholds.fail_below > thresholds.warn_below:
        raise UsageError("--fail-below: must not exceed --warn-below")
    if args.nodes is not None and args.nodes < 1:
        raise UsageError("--nodes: must be at least 1")
    group, instance_type = _group(args)
    if group is None and instance_type is None:
        raise UsageError("--spec: give the cluster spec (plan and published results) or --instance-type "
                         "(published results only)")
    instance = _instance(group, instance_type)
    try:
        runs = nccl_output.parse(text, collective=args.collective)
    except nccl_output.OutputError as e:
        raise UsageError(f"LOG: {args.log}: {e}") from None
    results: List[verdict.RunVerdict] = []
    for i, run in enumerate(runs, 1):
        if run.collective not in BUS_FACTOR:
            raise UsageError(f"--collective: run {i} of {args.log} does not name its collective; give one of "
                             f"{', '.join(BUS_FACTOR)}")
        nodes = len(run.hosts) or args.nodes or (group.count if group is not None else 0)
        if run.hosts and args.nodes is not None and args.nodes != nodes:
            raise UsageError(f"--nodes: {args.nodes}, but run {i} lists ranks on {nodes} host(s)")
        if not nodes:
            raise UsageError(f"--nodes: run {i} lists no ranks (its header is missing); give the node count")
        per_host = run.ranks_per_host or (instance.gpus if instance is not None else 8)
        ranks = len(run.ranks) or nodes * per_host
        model = None
        if instance is not None and ranks > 1:
            try:
                model = fabric_model.expect(fabric_model.Fabric.of(instance), run.collective, nodes, per_host)
            except ValueError:  # GPUs with no NVLink between them on one host: no fabric to model
                model = None
        plan = plan_bound(group, run.collective, ranks, per_host) if group is not None and ranks > 1 else None
        results.append(verdict.judge(run, hosts=nodes, ranks=ranks, instance_type=instance_type, model=model,
                                     thresholds=thresholds, plan=plan))
    covered = coverage.of(results, group.name, group.count) if group is not None else None
    worst = verdict.worst([r.verdict for r in results])
    overall = verdict.worst([worst, verdict.WARN if covered is not None and not covered.complete else verdict.INFO])
    if args.json:
        print(json.dumps({"verdict": overall, "coverage": covered.to_json() if covered else None,
                          "runs": [r.to_json() for r in results]}, indent=2))
    else:
        print("\n\n".join(_render(r) for r in results))
        if covered is not None:
            print("\n" + "\n".join(covered.describe(args.spec)))
    return EXIT_FAILED if overall == verdict.FAIL or (args.strict and overall == verdict.WARN) else EXIT_OK


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def _render(r: Any) -> str:
    hosts = f", hosts {', '.join(r.hosts)}" if 0 < len(r.hosts) <= 4 else ""
    lines = [f"{r.collective} on {r.nodes} x {r.instance_type or '?'} ({r.ranks} ranks{hosts}): {r.verdict.upper()}"]
    if r.model:
        peak = (f"; peak {r.peak[1]:.1f} GB/s at {_size(r.peak[0])} = {r.peak[1] / r.model.expected_gbs:.0%}: "
                f"{r.model_verdict.upper()}" if r.peak else "; no size of 1 GiB or more to judge")
        lines.append(f"  model: {r.model.expected_gbs:.1f} GB/s busbw expected ({r.model.formula}), physical limit "
                     f"{r.model.limit_gbs:.1f} GB/s{peak}")
    else:
        lines.append("  model: none (instance type unknown to the catalog)")
    if r.plan:
        lines.append(f"  plan: {r.plan.busbw_gbs:.1f} GB/s busbw, the planner's phases added (not judged; NCCL overlaps "
                     f"them)")
    lines.append(f"  published: {r.published_source or 'none for this instance type, collective and node count'}")
    lines.extend(f"  problem: {p}" for p in r.problems)
    lines.append(f"  {'size':>10} {'busbw GB/s':>11} {'model':>8} {'published':>10}  verdict  why")
    for s in r.sizes:
        model = f"{s.model:.1f}" if s.model else "-"
        pub = f"{s.published:.1f}" if s.published else "-"
        lines.append(f"  {_size(s.size):>10} {s.busbw:>11.2f} {model:>8} {pub:>10}  {s.verdict:<7}  {'; '.join(s.reasons)}")
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction[Any]) -> None:
    help_ = ("Serving acceptance: judge a `fmcluster job serve` log (vllm bench serve) against the deployment's SLOs and "
             "the plan. Fabric acceptance: judge nccl-tests output (all_reduce_perf, alltoall_perf) against the fabric model "
             "(NCCL's hierarchical collectives on the instance's NVLink and EFA) and published results, and say which "
             "of the group's nodes it tested; exit 0 pass, 1 fail (or, with --strict, a warning or an untested node), "
             "2 bad input.")
    sp = sub.add_parser("accept", help=help_, description=help_)
    sp.set_defaults(func=cmd_accept)
    sp.add_argument("log", help="the job's output (one or more nccl-tests runs)")
    sp.add_argument("--spec", help="the cluster spec: the instance type, the group's nodes (coverage), the plan")
    sp.add_argument("--group", help="the GPU node group the test ran on (default: the spec's only GPU group)")
    sp.add_argument("--instance-type", help="without --spec: the fabric model and published results for this type")
    sp.add_argument("--nodes", type=int, help="node count, when the log lists no ranks")
    sp.add_argument("--collective", help="the collective of runs the log does not name (all_reduce, alltoall, ...)")
    sp.add_argument("--warn-below", default="0.8", help="share of a reference below which a size warns (default 0.8)")
    sp.add_argument("--fail-below", default="0.6", help="share of a reference below which a size fails (default 0.6)")
    sp.add_argument("--strict", action="store_true", help="a warning, or a node of the group not tested, fails too (exit 1)")
    sp.add_argument("--json", action="store_true", help="every size with its references and verdict, as JSON")
    sp.add_argument("--model", help="a serving load test (`fmcluster job serve`'s log, or vllm bench serve's output or "
                                    "saved JSON): the deployment it tested, where the log does not name it")

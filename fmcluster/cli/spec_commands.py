"""Commands that need only the spec: validate | plan | schema | catalog | synth (offline)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from fmcluster.cli import synth_output
from fmcluster.cli.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError


def _load(path: str) -> Any:
    from fmcluster.registry import load_spec

    return load_spec(path)


def cmd_validate(args: argparse.Namespace) -> int:
    from fmcluster.cli import spec_warnings

    spec = _load(args.file)
    elastic = "".join(f", {g.name} {g.min_size}-{g.max_size}" for g in spec.node_groups if g.elastic)
    print(f"{args.file}: valid ({len(spec.node_groups)} node group(s), {sum(g.count for g in spec.node_groups)} nodes"
          f"{elastic})")
    for line in spec_warnings.lines(spec):  # valid all the same: exit 0
        print(line, file=sys.stderr)
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    from fmcluster.planner.cli import PlanUsageError, run_plan

    try:
        return run_plan(args)
    except PlanUsageError as e:
        raise UsageError(str(e)) from None


def cmd_diagram(args: argparse.Namespace) -> int:
    from fmcluster.planner.cli import PlanUsageError, run_diagram

    try:
        return run_diagram(args)
    except PlanUsageError as e:
        raise UsageError(str(e)) from None


def cmd_schema(args: argparse.Namespace) -> int:
    from fmcluster.registry import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=True))
    return EXIT_OK


def cmd_catalog(args: argparse.Namespace) -> int:
    from fmcluster import catalog

    types = catalog.all_types()
    if args.json:
        print(json.dumps({n: t.summary() for n, t in sorted(types.items())}, indent=2))
        return EXIT_OK
    header = ("type", "GPU", "n", "HBM MiB", "BF16 TF", "EFA", "cards", "Gbps", "NVMe GB", "vCPU")
    print("{:<20} {:<8} {:>2} {:>8} {:>8} {:>4} {:>5} {:>6} {:>8} {:>5}".format(*header))
    for n, t in sorted(types.items(), key=lambda kv: (not kv[1].is_gpu, kv[0])):
        mark = " *" if t.unverified else ""
        print(
            f"{n:<20} {t.gpu or '-':<8} {t.gpus:>2} {t.gpu_memory_mib:>8} {t.bf16_dense_tflops:>8g} {t.efa_interfaces:>4} "
            f"{t.network_cards:>5} {t.network_gbps:>6g} {t.nvme_gb if t.nvme_gb is not None else '?':>8} {t.vcpus:>5}{mark}"
        )
    print("* has unverified facts (see --json: unverified, sources)")
    return EXIT_OK


def cmd_synth(args: argparse.Namespace) -> int:
    spec = _load(args.file)
    out = Path(args.out)
    target = synth_output.target_of(out, Path(args.file))  # refused before the CDK loads or anything is synthesized
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from fmcluster import app

    # Synthesize next to the target and swap in only on success: nothing half-written.
    try:
        staging = synth_output.staging_beside(target)
    except OSError as e:
        print(f"--out {out}: cannot write there ({e.strerror or e})", file=sys.stderr)
        return EXIT_USAGE
    try:
        try:
            app.build_app(spec, outdir=str(staging)).synth()
        except RuntimeError as e:
            _report_failure(e, staging, target, args)
            return EXIT_FAILED
        synth_output.swap_in(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    stacks = sorted(p.name for p in target.glob("*.template.json"))
    if not args.json:
        print(f"wrote {len(stacks)} template(s) to {out}: {', '.join(stacks)}")
    from fmcluster.cli.synth_summary import print_summary

    print_summary(spec, target, args.file, as_json=args.json)
    return EXIT_OK


def _report_failure(error: Exception, staging: Path, target: Path, args: argparse.Namespace) -> None:
    """Say why synthesis failed. cdk-nag's report is kept beside --out (the staging folder it was written to goes);
    no line names the staging folder."""
    from fmcluster.outputs import marker
    from fmcluster.outputs.write import OutputRefused, claim, write

    try:
        data = json.loads((staging / "validation-report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        print(f"synthesis failed: {str(error).replace(str(staging), '<synth staging folder, removed>')}",
              file=sys.stderr)
        return
    kept = f"{target.parent / target.name}.validation-report.json"
    try:
        write(claim(kept, "report", marker.JSON, force=args.force, spec=args.file),
              json.dumps(data, indent=2).encode("utf-8"))
        where = f"full report: {kept}"
    except OutputRefused as e:
        where = f"full report not kept: {e}"
    print(f"synthesis failed: cdk-nag findings no construct acknowledges ({where})", file=sys.stderr)
    print(_summarize_report(data), file=sys.stderr)


def _summarize_report(data: Any) -> str:
    lines = []
    for plugin in data.get("pluginReports", []):
        for v in plugin.get("violations", []):
            where = ", ".join(c.get("constructPath", "?") for c in v.get("violatingConstructs", []))
            lines.append(f"  {plugin['pluginName']} {v.get('ruleName')}: {v.get('description')} at {where}")
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the offline subcommands to the `fmcluster` parser."""

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=fn)
        return sp

    sp = add("validate", cmd_validate, "Check a spec; exit 2 with one line per problem.")
    sp.add_argument("file")
    from fmcluster.planner.cli import add_diagram_arguments, add_plan_arguments

    add_plan_arguments(add("plan", cmd_plan, "Capacity planner: what the spec buys and costs; with a model, memory fit, "
                           "step-time bounds, checkpoints and the data path (offline)."))
    add_diagram_arguments(add("diagram", cmd_diagram, "Draw the cluster (node groups, NVLink domains, EFA, placement, "
                              "shared storage and S3, the orchestrator, AMP/Grafana) as SVG, PNG or PDF."))
    add("schema", cmd_schema, "Print the spec's JSON Schema.")
    sp = add("catalog", cmd_catalog, "Print the instance catalog.")
    sp.add_argument("--json", action="store_true")
    sp = add("synth", cmd_synth, "Write the CloudFormation templates for a spec, offline.")
    sp.add_argument("file")
    sp.add_argument("--out", default="cdk.out", help="Output directory (default cdk.out); an existing one is replaced "
                    "only when an earlier synth wrote it.")
    sp.add_argument("--json", action="store_true", help="Print the summary (stacks, deploy order, next commands) as JSON.")
    sp.add_argument("--force", action="store_true", help="After a failed synthesis, replace OUT.validation-report.json "
                    "even when fmcluster did not write it. Never makes --out replace a folder with foreign entries.")

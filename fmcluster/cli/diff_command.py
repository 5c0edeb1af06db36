"""`fmcluster diff`: what a change does to a running cluster, before it is deployed.

    fmcluster diff OLD NEW            two specs, or two directories of synthesized templates (cdk.out)
    fmcluster diff SPEC --git-rev REV the spec against its own version at a git revision
    fmcluster diff SPEC --deployed    the spec against the deployed stacks (CloudFormation change sets, never executed)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.cli.errors import EXIT_FAILED, EXIT_OK, UsageError

GIT_TIMEOUT_S = 30
GIT_MAX_BYTES = 1 << 20  # a spec is a few KB; anything near this is not one


def _templates_dir(path: Path) -> Dict[str, Dict[str, Any]]:
    found = sorted(path.glob("*.template.json"))
    if not found:
        raise UsageError(f"{path}: a directory without *.template.json files (run fmcluster synth --out {path})")
    try:
        return {p.name[: -len(".template.json")]: json.loads(p.read_text()) for p in found}
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: cannot read a template ({e})") from None


def _synthesize(spec: Any) -> Dict[str, Dict[str, Any]]:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from fmcluster.app import synthesize

    return synthesize(spec)


def _side(arg: str) -> Tuple[Dict[str, Dict[str, Any]], Optional[str]]:
    """A spec file (synthesized here) or a directory of templates; and the spec's region when it is a spec."""
    from fmcluster.registry import load_spec

    path = Path(arg)
    if path.is_dir():
        return _templates_dir(path), None
    spec = load_spec(path)
    return _synthesize(spec), spec.region


def _spec_at_revision(spec_path: str, rev: str) -> Any:
    """The spec as it was at `rev`, read with `git show` (bounded in time and size)."""
    import subprocess  # here, not at the top: every command imports this module to register its arguments
    import tempfile

    from fmcluster.registry import load_spec

    path = Path(spec_path).resolve()
    if rev.startswith("-"):
        raise UsageError(f"--git-rev {rev}: a revision, not an option")
    try:
        done = subprocess.run(["git", "-C", str(path.parent), "show", f"{rev}:./{path.name}"], capture_output=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UsageError("--git-rev: git is not installed") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--git-rev {rev}: git show did not answer within {GIT_TIMEOUT_S}s") from None
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["git show failed"]
        raise UsageError(f"--git-rev {rev}: {reason[0]}")
    if len(done.stdout) > GIT_MAX_BYTES:
        raise UsageError(f"--git-rev {rev}: {path.name} is over {GIT_MAX_BYTES} bytes there, not a spec")
    with tempfile.TemporaryDirectory(prefix="fmcluster-diff-") as tmp:
        old = Path(tmp) / path.name
        old.write_bytes(done.stdout)
        return load_spec(old)


def _fail_on(value: str) -> List[str]:
    from fmcluster.diff import CLASSES

    names = [v.strip() for v in value.split(",") if v.strip()]
    wrong = [n for n in names if n not in CLASSES]
    if wrong or not names:
        raise UsageError(f"--fail-on {value}: allowed classes are {', '.join(CLASSES)} (comma-separated)")
    return names


def cmd_diff(args: argparse.Namespace) -> int:
    from fmcluster.diff import compare
    from fmcluster.diff.render import as_json, as_markdown, as_text

    fail_on = _fail_on(args.fail_on) if args.fail_on else []
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be more than 0 seconds")
    modes = sum(bool(x) for x in (args.new, args.git_rev, args.deployed))
    if modes != 1:
        raise UsageError("diff: give NEW, or --git-rev REV, or --deployed (exactly one)")
    from fmcluster.registry import load_spec

    if args.deployed:
        from fmcluster.cli.diff_deployed import deployed_report
        from fmcluster.diff.changeset import ChangeSetError

        try:
            spec = load_spec(args.old)
            report = deployed_report(spec, _synthesize(spec), timeout_s=args.timeout,
                                     template_bucket=args.template_bucket)
        except ChangeSetError as e:
            print(f"fmcluster diff: {e}", file=sys.stderr)
            return EXIT_FAILED
    elif args.git_rev:
        spec = load_spec(args.old)
        old = _synthesize(_spec_at_revision(args.old, args.git_rev))
        report = compare(old, _synthesize(spec), region=spec.region)
    else:
        (old, _), (new, region) = _side(args.old), _side(args.new)
        report = compare(old, new, region=region or "us-east-1")  # the provider schemas of the region deployed to
    render = as_json if args.json else as_markdown if args.markdown else as_text
    sys.stdout.write(render(report))
    hit = sorted(set(fail_on) & set(report.classes()))
    if hit:
        print(f"fmcluster diff: {', '.join(hit)} consequences present (--fail-on {args.fail_on})", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def register(sub: argparse._SubParsersAction[Any]) -> None:
    sp = sub.add_parser("diff", help="What a change does to data, nodes, control plane and capacity.",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.set_defaults(func=cmd_diff)
    sp.add_argument("old", metavar="OLD", help="the current spec (or a directory of synthesized templates)")
    sp.add_argument("new", metavar="NEW", nargs="?", help="the changed spec (or a directory of synthesized templates)")
    sp.add_argument("--git-rev", metavar="REV", help="compare OLD's version at this git revision with OLD now")
    sp.add_argument("--deployed", action="store_true",
                    help="compare with the deployed stacks through CloudFormation change sets (needs AWS credentials; "
                         "the change sets are never executed and always deleted)")
    sp.add_argument("--template-bucket", metavar="BUCKET",
                    help="with --deployed: an S3 bucket for templates over CloudFormation's 51,200-byte body limit")
    sp.add_argument("--timeout", type=float, default=300.0, help="with --deployed: seconds to wait per change set")
    out = sp.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="Markdown for a pull-request comment")
    out.add_argument("--json", action="store_true")
    sp.add_argument("--fail-on", metavar="CLASSES",
                    help="exit 1 when any of these classes is present: data,nodes,control-plane,capacity,safe")

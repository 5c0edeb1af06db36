"""`fmcluster diff`: what a change does to a running cluster, before it is deployed.

    fmcluster diff OLD NEW            two specs, or two directories of synthesized templates (cdk.out)
    fmcluster diff SPEC --git-rev REV the spec against its own version at a git revision
    fmcluster diff SPEC --deployed    the spec against the deployed stacks (CloudFormation change sets, never executed)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from fmcluster.cli.errors import EXIT_FAILED, EXIT_OK, UsageError

GIT_TIMEOUT_S = 30
GIT_MAX_BYTES = 1 << 20  # a spec is a few KB; anything near this is not one
DEFAULT_REGION = "us-east-1"
REGION = r"^[a-z]{2}(-[a-z]+)+-\d$"


TEMPLATE_MAX_BYTES = 10 << 20  # CloudFormation takes templates up to 1 MB (from S3); a file near this is not one


def _template_shape(name: str, template: Any) -> Optional[str]:
    """What makes a parsed template unusable, or None: the sections diff reads must be what CloudFormation takes."""
    if not isinstance(template, dict):
        return "not a JSON object"
    for section in ("Resources", "Outputs"):
        if not isinstance(template.get(section, {}), dict):
            return f"{section} is not an object"
    for lid, resource in template.get("Resources", {}).items():
        if not isinstance(resource, dict) or not isinstance(resource.get("Type"), str):
            return f"resource {str(lid)[:80]} is not an object with a Type"
        for key in ("Properties", "Metadata"):
            if not isinstance(resource.get(key, {}), dict):
                return f"resource {str(lid)[:80]}: {key} is not an object"
    for lid, output in template.get("Outputs", {}).items():
        if not isinstance(output, dict) or not isinstance(output.get("Export", {}), dict):
            return f"output {str(lid)[:80]} is not an object"
    return None


def _templates_dir(path: Path) -> Dict[str, Dict[str, Any]]:
    found = sorted(path.glob("*.template.json"))
    if not found:
        raise UsageError(f"{path}: a directory without *.template.json files (run fmcluster synth --out {path})")
    out = {}
    for p in found:
        try:
            if not p.is_file() or p.stat().st_size > TEMPLATE_MAX_BYTES:
                raise UsageError(f"{p}: not a template file (a regular file under {TEMPLATE_MAX_BYTES >> 20} MB)")
            template = json.loads(p.read_bytes().decode("utf-8"))
        except (OSError, ValueError, RecursionError) as e:
            raise UsageError(f"{p}: cannot read a template ({type(e).__name__}: {str(e)[:200]})") from None
        wrong = _template_shape(p.name, template)
        if wrong:
            raise UsageError(f"{p}: not a CloudFormation template: {wrong}")
        out[p.name[: -len(".template.json")]] = template
    return out


def _assembly_region(path: Path, templates: Dict[str, Dict[str, Any]]) -> Optional[str]:
    """The region the templates were synthesized for: the cloud assembly's manifest (aws://account/region), else the
    one region their Availability Zones name; None when neither says."""
    try:
        artifacts = json.loads((path / "manifest.json").read_text()).get("artifacts", {})
        regions = {str(a.get("environment", "")).rsplit("/", 1)[-1] for a in artifacts.values()
                   if isinstance(a, dict) and a.get("type") == "aws:cloudformation:stack"}
    except (OSError, ValueError, AttributeError):
        regions = set()
    regions.discard("unknown-region")
    if len(regions) == 1:
        return regions.pop()
    zones = {str(r.get("Properties", {}).get("AvailabilityZone"))[:-1] for t in templates.values()
             for r in t.get("Resources", {}).values()
             if r.get("Type") == "AWS::EC2::Subnet" and isinstance(r.get("Properties", {}).get("AvailabilityZone"), str)}
    return zones.pop() if len(zones) == 1 else None


def _synthesize(spec: Any) -> Dict[str, Dict[str, Any]]:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from fmcluster.app import synthesize

    # cdk-nag reads templates and never changes them: a diff skips it (synth and deploy still run it)
    return synthesize(spec, nag=False)


class _Side:
    """One side of `diff OLD NEW`: a spec (synthesized only once both sides are known to be readable) or a folder."""

    def __init__(self, arg: str) -> None:
        from fmcluster.registry import load_spec

        path = Path(arg)
        self.templates: Optional[Dict[str, Dict[str, Any]]] = None
        self.spec: Any = None
        self.region: Optional[str] = None
        if path.is_dir():
            self.templates = _templates_dir(path)
            self.region = _assembly_region(path, self.templates)
        else:
            self.spec = load_spec(path)
            self.region = self.spec.region

    def synthesized(self) -> Dict[str, Dict[str, Any]]:
        return self.templates if self.templates is not None else _synthesize(self.spec)


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

    fail_on = _fail_on(args.fail_on) if args.fail_on is not None else []
    if not 0 < args.timeout <= 3600:  # also refuses nan and inf
        raise UsageError(f"--timeout {args.timeout:g}: seconds, more than 0 and at most 3600")
    if args.region is not None and not re.match(REGION, args.region):
        raise UsageError(f"--region {args.region}: a region name such as us-east-1")
    if args.region is not None and not args.new:
        raise UsageError("--region: only with OLD NEW (a spec names its own region)")
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
        sides = _Side(args.old), _Side(args.new)  # both read and checked before either is synthesized
        region = args.region or sides[1].region or sides[0].region
        report = compare(sides[0].synthesized(), sides[1].synthesized(), region=region or DEFAULT_REGION)
        if region is None:
            report.notes.append(f"neither side names its region (no cloud assembly manifest, no one Availability "
                                f"Zone): create-only rules are {DEFAULT_REGION}'s; pass --region for another")
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
    sp.add_argument("--region", help="with two template folders: the region whose resource schemas apply (default: "
                    "the cloud assembly's, else the one its subnets' Availability Zones name, else us-east-1)")
    out = sp.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="Markdown for a pull-request comment")
    out.add_argument("--json", action="store_true")
    sp.add_argument("--fail-on", metavar="CLASSES",
                    help="exit 1 when any of these classes is present: data,nodes,control-plane,capacity,safe")

"""Commands backed by AWS calls (preflight, status).

Exit codes: 0 every check passed (warnings and skips allowed), 1 a check failed or errored, 2 bad input (spec,
unknown profile, conflicting region, --deadline), 3 (preflight) nothing failed but some check could not run, unless
--allow-unchecked. Each result goes to stderr as it finishes, the report to stdout; the whole run ends within
--deadline seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING, Any, List

from fmcluster.cli.errors import UsageError

if TYPE_CHECKING:
    from fmcluster.aws.session import AwsClients

# The whole preflight or status run ends within this many seconds unless --deadline says otherwise.
DEFAULT_DEADLINE_S = 240.0
# A day: far past what either run needs, and within what a thread's wait takes (threading.TIMEOUT_MAX).
MAX_DEADLINE_S = 86_400.0


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _clients(args: argparse.Namespace, spec: Any) -> AwsClients:
    from fmcluster.aws.session import AwsClients, AwsSetupError  # boto3 loads for the AWS commands only

    region = args.region or spec.region
    if region != spec.region:
        raise UsageError(f"--region {region} differs from the spec's region {spec.region} (its availability zone "
                         f"{spec.availability_zone} and reservations live there); edit the spec to check another "
                         "region")
    aws = AwsClients(region, args.profile, deadline_s=args.deadline)
    try:
        aws.session  # noqa: B018 - resolves the profile now: an unknown profile is bad input (exit 2)
    except AwsSetupError as e:
        raise UsageError(str(e)) from None
    return aws


def _skips(values: List[str]) -> List[str]:
    return [s.strip() for v in values or [] for s in v.split(",") if s.strip()]


def cmd_preflight(args: argparse.Namespace) -> int:
    from fmcluster.aws.preflight import run_preflight
    from fmcluster.registry import kind_of, load_spec, store_preflight_checks

    spec = load_spec(args.file)
    aws = _clients(args, spec)
    report = run_preflight(spec, aws, label=args.file, skip=_skips(args.skip), progress=_progress,
                           kind_checks=kind_of(spec).preflight_checks(spec),
                           store_checks=store_preflight_checks(spec), deadline_s=args.deadline,
                           tolerate_unchecked=args.allow_unchecked)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.render_text())
    return report.exit_code


def cmd_status(args: argparse.Namespace) -> int:
    from fmcluster.aws.status import collect_status
    from fmcluster.registry import load_spec, status_describers

    spec = load_spec(args.file)
    aws = _clients(args, spec)
    status = collect_status(spec, aws, label=args.file, progress=_progress, deadline_s=args.deadline,
                            registered=status_describers())
    print(json.dumps(status.to_dict(), indent=2, default=str) if args.json else status.render_text())
    return status.exit_code


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_DEADLINE_S:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give a number of seconds greater than 0 and at most "
                                         f"{MAX_DEADLINE_S:.0f} (a day)")
    return value


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("file", help="Cluster spec (YAML).")
    sp.add_argument("--region", help="AWS region (default: the spec's region; must match it).")
    sp.add_argument("--profile", help="Named AWS profile (default: standard credential resolution).")
    sp.add_argument("--json", action="store_true", help="Print the report as JSON.")
    sp.add_argument("--deadline", type=_seconds, default=DEFAULT_DEADLINE_S, metavar="SECONDS",
                    help=f"End the whole run within this many seconds (default {DEFAULT_DEADLINE_S:g}); what is left "
                    "is reported as not run.")


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the AWS-backed subcommands to the `fmcluster` parser."""
    text = ("Read-only AWS checks before deploy: credentials and account, AZ and instance offerings, quotas, "
            "capacity reservations / Capacity Blocks / training plans, existing VPC, subnets and bucket, "
            "CDK bootstrap, stack states. Exit 0 all pass, 1 a check failed or errored, 2 bad input, 3 nothing "
            "failed but some check could not run (e.g. access denied; see docs/preflight.md).")
    sp = sub.add_parser("preflight", help="Read-only AWS checks before deploy.", description=text)
    _common(sp)
    sp.add_argument("--skip", action="append", default=[], metavar="ID[,ID]",
                    help="Skip checks by id or id prefix (e.g. quota, capacity:cr-..., cdk-bootstrap).")
    sp.add_argument("--allow-unchecked", action="store_true",
                    help="Exit 0 rather than 3 when nothing failed but some check could not run (they still print).")
    sp.set_defaults(func=cmd_preflight)
    text = ("After deploy: each stack's state, the shared stores and their links to S3, HyperPod cluster and nodes "
            "or PCS node groups, placement groups, AMP workspace. Exit 0 all healthy, 1 something is failed, in progress "
            "or cannot be read.")
    sp = sub.add_parser("status", help="State of a deployed cluster at a glance.", description=text)
    _common(sp)
    sp.set_defaults(func=cmd_status)

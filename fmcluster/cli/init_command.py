"""`fmcluster init FILE`: a new cluster's spec from a few answers given as flags (orchestrator, instance type, count,
capacity, region), validated before it is written.

Nothing is asked interactively, so the same command runs in a terminal, a script or CI. The file is created, never
replaced: an existing FILE is refused (exit 2) and the spec appears whole or not at all (written beside it, then
linked into place, which fails rather than overwrite a file that appeared meanwhile).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Tuple

import yaml

from fmcluster.cli.errors import EXIT_OK, UsageError

CAPACITY_TYPES = ("on-demand", "odcr", "capacity-block", "training-plan")


def group_name(instance_type: str) -> str:
    """The node group's name: the GPU model (h100, b200), which partitions, queues and quotas are named after."""
    from fmcluster import catalog
    from fmcluster.runtime.contract import ec2_type

    t = catalog.all_types().get(ec2_type(instance_type))
    gpu = re.sub(r"[^a-z0-9]", "", (t.gpu or "").lower()) if t is not None else ""
    return gpu if gpu and gpu[0].isalpha() else "gpu"


def capacity_of(args: argparse.Namespace) -> Dict[str, Any]:
    """The node group's capacity; a reservation's size (--reservation-size) lets validate refuse a count it cannot hold."""
    capacity = _capacity_type(args)
    if args.reservation_size is not None:
        if args.capacity == "on-demand":
            raise UsageError("--reservation-size: applies with --capacity odcr, capacity-block or training-plan "
                             "(the instances the reservation holds), not on-demand")
        capacity["size"] = args.reservation_size
    return capacity


def _capacity_type(args: argparse.Namespace) -> Dict[str, Any]:
    if args.capacity in ("odcr", "capacity-block"):
        if not args.reservation_id:
            raise UsageError(f"--reservation-id: --capacity {args.capacity} needs the reservation's id (cr-...)")
        return {"type": args.capacity, "reservation_id": args.reservation_id}
    if args.reservation_id:
        raise UsageError(f"--reservation-id: applies with --capacity odcr or capacity-block, not {args.capacity}")
    if args.capacity == "training-plan":
        if not args.training_plan_arn:
            raise UsageError("--training-plan-arn: --capacity training-plan needs the plan's ARN")
        return {"type": "training-plan", "training_plan_arn": args.training_plan_arn}
    if args.training_plan_arn:
        raise UsageError(f"--training-plan-arn: applies with --capacity training-plan, not {args.capacity}")
    return {"type": args.capacity}


def scaffold(args: argparse.Namespace) -> Dict[str, Any]:
    """The spec as data, from the flags; every refusal a UsageError naming the flag and what it takes."""
    from fmcluster.orchestrators.kind import Scaffold
    from fmcluster.registry import kind_named

    kind = kind_named(args.orchestrator)
    if args.capacity not in kind.nodes.capacity_types:
        raise UsageError(f"--capacity: orchestrator {kind.name} takes {', '.join(sorted(kind.nodes.capacity_types))}, not "
                         f"{args.capacity} (docs/capacity.md says what to buy for each)")
    name = args.name or f"{kind.name.replace('-', '')}-{group_name(args.instance_type)}"
    zone = args.availability_zone or f"{args.region}a"
    group = group_name(args.instance_type)
    request = Scaffold(name=name, region=args.region, availability_zone=zone, group=group,
                       instance_type=args.instance_type, count=args.count, admins=tuple(args.admin or ()),
                       ami_id=args.ami_id)
    try:
        orchestrator = kind.scaffold(request)
    except ValueError as e:
        raise UsageError(str(e)) from None
    node_group: Dict[str, Any] = {"name": group, "instance_type": args.instance_type, "count": args.count,
                                  "capacity": capacity_of(args)}
    if args.ami_id:  # the image family says where its root device is; the DLAMI's Ubuntu 22.04 unless told
        node_group["ami_id"] = args.ami_id
        node_group["image_family"] = args.image_family or "dlami-ubuntu-22.04"
    elif args.image_family:
        node_group["image_family"] = args.image_family
    spec: Dict[str, Any] = {"name": name, "region": args.region, "availability_zone": zone,
                            "network": {"new_vpc": {"cidr": "10.0.0.0/16"}}, "orchestrator": orchestrator,
                            "node_groups": [node_group]}
    storage = {store.spec_key: section for store, section in _init_sections() if getattr(args, _dest(store))}
    if storage:
        spec["storage"] = storage
    spec["observability"] = {"alert_emails": list(args.alert_email or [])}
    return spec


def _init_sections() -> List[Tuple[Any, Dict[str, Any]]]:
    """(store, its section) for every registered store that offers init one (`Store.init_section`)."""
    from fmcluster.registry import stores

    return [(store, section) for store in stores() for section in [store.init_section()] if section is not None]


def _dest(store: Any) -> str:
    return f"store_{store.spec_key}"


def render(spec: Dict[str, Any]) -> str:
    head = ["# A cluster spec written by `fmcluster init`.",
            "# Every field, with what it takes: `fmcluster schema`, README \"The spec\". Next:",
            "#   fmcluster validate FILE && fmcluster plan FILE && fmcluster synth FILE   (README, first page)"]
    return "\n".join(head) + "\n" + yaml.safe_dump(spec, sort_keys=False, width=120)


def write_new(path: Path, text: str) -> None:
    """Create `path` with `text`, whole, or fail; never replace what is there."""
    if path.exists() or path.is_symlink():
        raise UsageError(f"{path}: already exists; init writes new files only (choose another name or remove it)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{path}: no directory {parent}")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.link(tmp, path)  # fails if the path appeared meanwhile: nothing is overwritten
    except FileExistsError:
        raise UsageError(f"{path}: already exists; init writes new files only") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot write there ({e.strerror or e})") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def cmd_init(args: argparse.Namespace) -> int:
    from fmcluster.registry import parse_spec

    data = scaffold(args)
    parsed = parse_spec(data)  # a SpecError (exit 2, one line per field) leaves nothing written
    text = render(data)
    write_new(Path(args.file), text)
    f = args.file
    print(f"wrote {f}: {parsed.name}, {args.count} x {args.instance_type} under {args.orchestrator} in "
          f"{parsed.availability_zone}", file=sys.stderr)
    from fmcluster.cli.cdk_cli import cdk

    print("\n".join([f"fmcluster validate {f}", f"fmcluster plan {f}", f"fmcluster synth {f} --out cdk.out",
                     f"fmcluster preflight {f}", cdk("deploy --app cdk.out --all"),
                     f"fmcluster job nccl {f} --out <file>"]))
    return EXIT_OK


def register(sub: argparse._SubParsersAction[Any]) -> None:
    from fmcluster.registry import names

    help_ = "Write a new cluster spec from a few answers (flags; nothing is asked, nothing is overwritten)."
    sp = sub.add_parser("init", help=help_, description=help_)
    sp.set_defaults(func=cmd_init)
    sp.add_argument("file", help="The spec to create (must not exist).")
    sp.add_argument("--orchestrator", required=True, choices=names(), help="Who runs the jobs.")
    sp.add_argument("--instance-type", required=True, help="GPU instance type, e.g. p5.48xlarge (`fmcluster catalog`).")
    sp.add_argument("--count", required=True, type=_count, help="Instances in the GPU group (1-2048).")
    sp.add_argument("--region", required=True, help="AWS region, e.g. us-east-1.")
    sp.add_argument("--capacity", default="on-demand", choices=CAPACITY_TYPES, help="How the GPUs are bought.")
    sp.add_argument("--reservation-id", help="cr-...: the ODCR or Capacity Block (with --capacity odcr | capacity-block).")
    sp.add_argument("--training-plan-arn", help="The SageMaker training plan (with --capacity training-plan).")
    sp.add_argument("--reservation-size", type=_count, help="Instances the reservation or training plan holds: "
                    "validate then refuses a --count it cannot hold (capacity.size).")
    sp.add_argument("--availability-zone", help="The GPUs' AZ (default: the region's a; a reservation's own AZ).")
    sp.add_argument("--name", help="Cluster name, prefix of every stack (default from orchestrator and GPU).")
    sp.add_argument("--admin", action="append", help="IAM role or user ARN administering an EKS cluster (repeatable).")
    sp.add_argument("--ami-id", help="The nodes' AMI (PCS: one with the PCS agent and Slurm).")
    sp.add_argument("--image-family", help="What --ami-id was built from (default dlami-ubuntu-22.04).")
    sp.add_argument("--alert-email", action="append", help="Address for the cluster's alerts (repeatable).")
    for store, _ in _init_sections():  # --no-<key>: leave the store's section out
        noun = " file system" if store.settings is not None and store.settings.shared_file_system else ""
        sp.add_argument(f"--no-{store.spec_key.replace('_', '-')}", dest=_dest(store), action="store_false",
                        help=f"No {store.title}{noun}.")


def _count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 2048:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of instances, 1-2048")
    return int(text)

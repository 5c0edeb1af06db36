"""`fmcluster status`: a deployed cluster at a glance.

Resources are discovered from the stacks themselves (ListStackResources, by resource type), so
status follows whatever the storage, observability and cluster stacks create without reading
spec fields: placement groups, AMP workspaces, the nodes' reports, and what each store and orchestrator kind
describes (a file system and its associations; HyperPod clusters and nodes, PCS clusters and node groups); any
resource whose deployment failed is listed with CloudFormation's reason.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from botocore.exceptions import ClientError

from fmcluster.aws import node_reports
from fmcluster.aws.context import Context, Progress, bounded, fmt_time, has_code, paginate, past_deadline
from fmcluster.aws.results import ERROR, classify
from fmcluster.aws.session import AwsClients, max_attempts
from fmcluster.aws.status_items import ABSENT, BAD, OK, PENDING, UNKNOWN, WARN, Item, health

__all__ = ["ABSENT", "BAD", "OK", "PENDING", "UNKNOWN", "WARN", "Item", "health", "collect_status"]

if TYPE_CHECKING:
    from fmcluster.spec import ClusterSpec

# An answer per resource, and the words for its health: one home (status_items), shared with the describers here.
Describer = Tuple[str, Callable[["Context", str], Optional["Item"]]]
STACK_PARTS = ("network", "storage", "observability", "cluster")


@dataclass
class StackState:
    name: str
    part: str
    state: str
    health: str
    detail: str = ""
    updated: str = ""
    resources: List[Item] = field(default_factory=list)


@dataclass
class ClusterStatus:
    spec: str
    region: str
    account: Optional[str]
    stacks: List[StackState] = field(default_factory=list)
    error: Optional[Dict[str, str]] = None

    def _healths(self) -> List[str]:
        out = []
        for s in self.stacks:
            out.append(s.health)
            for r in s.resources:
                out += [r.health] + [c.health for c in r.children]
        return out

    @property
    def overall(self) -> str:
        h = self._healths()
        if self.error is not None or BAD in h:
            return "failed"
        if UNKNOWN in h:
            return "unknown"
        if all(s.health == ABSENT for s in self.stacks):
            return "not deployed"
        if PENDING in h:
            return "in progress"
        return "degraded" if WARN in h else "ok"

    @property
    def exit_code(self) -> int:
        return 0 if self.overall in ("ok", "degraded") else 1

    def to_dict(self) -> Dict[str, Any]:
        return {"spec": self.spec, "region": self.region, "account": self.account, "overall": self.overall,
                "ok": self.exit_code == 0, "error": self.error, "stacks": [asdict(s) for s in self.stacks]}

    def render_text(self) -> str:
        lines = [f"{self.spec}: {self.region}, account {self.account or '?'}"]
        if self.error:
            lines.append(f"ERROR {self.error['observed']}")
            lines.append(f"      fix: {self.error['remedy']}")
        width = max([len(s.name) for s in self.stacks] + [20])
        for s in self.stacks:
            when = f"  {s.updated}" if s.updated else ""
            lines.append(f"{_mark(s.health)} {s.name:<{width}} {s.state}{when}{'  ' + s.detail if s.detail else ''}")
            for r in s.resources:
                lines.append(f"{_mark(r.health)}   {r.type} {r.name}: {r.state}{'  ' + r.detail if r.detail else ''}")
                for c in r.children:
                    lines.append(f"{_mark(c.health)}     {c.type} {c.name}: {c.state}"
                                 f"{'  ' + c.detail if c.detail else ''}")
        lines.append(f"overall: {self.overall} -> exit {self.exit_code}")
        return "\n".join(lines)


def _mark(health: str) -> str:
    return {OK: "OK   ", PENDING: "WAIT ", WARN: "WARN ", BAD: "FAIL ", UNKNOWN: "?    ", ABSENT: "-    "}[health]


def stackhealth(status: str) -> str:
    if status in ("ROLLBACK_COMPLETE", "DELETE_COMPLETE") or status.endswith("_FAILED"):
        return BAD
    if status.endswith("_IN_PROGRESS"):
        return PENDING
    if status == "UPDATE_ROLLBACK_COMPLETE":
        return WARN
    return OK


def arn_id(identifier: str, marker: str) -> str:
    """An id from an ARN (`.../marker/ID...`) or the id itself."""
    if identifier.startswith("arn:") and f"{marker}/" in identifier:
        return identifier.split(f"{marker}/", 1)[1].split("/")[0]
    return identifier


# --- describers: one per resource type --------------------------------------------------------


def _placement_group(ctx: Context, pid: str) -> Item:
    g = ctx.client("ec2").describe_placement_groups(GroupNames=[pid])["PlacementGroups"][0]
    state = g.get("State", "?")
    return Item("placement group", pid, state, health(state, {"available"}, {"pending"}),
                f"strategy {g.get('Strategy', '?')}")


def _amp(ctx: Context, pid: str) -> Item:
    w = ctx.client("amp").describe_workspace(workspaceId=arn_id(pid, "workspace"))["workspace"]
    state = w.get("status", {}).get("statusCode", "?")
    return Item("AMP workspace", w.get("workspaceId", pid), state,
                health(state, {"ACTIVE"}, {"CREATING", "UPDATING"}), w.get("prometheusEndpoint", ""))


# Resource type -> (service called, describer). The orchestrator kinds and the stores add their own
# (`OrchestratorKind.status_describers`, `Store.status_describers`, gathered by the composition root).
DESCRIBERS: Dict[str, Describer] = {
    "AWS::EC2::PlacementGroup": ("ec2", _placement_group),
    "AWS::APS::Workspace": ("amp", _amp),
    "AWS::S3::Bucket": ("s3", node_reports.describe),  # which runtime each node runs, where a bucket holds reports
}


def describers(registered: Mapping[str, Describer] = MappingProxyType({})) -> Dict[str, Describer]:
    """The describers above and the registered kinds' and stores' (`fmcluster.registry.status_describers`)."""
    return {**DESCRIBERS, **registered}


def _unknown(kind: str, name: str, exc: BaseException, service: str, ctx: Optional[Context] = None) -> Item:
    f = classify(exc, ctx.service_of(exc, service) if ctx else service, attempts=max_attempts())
    if f.fatal and not f.one_service and ctx is not None:  # sts answered: one service unreachable is its own
        ctx.stopped = f"an earlier call ended the run ({name}: {f.outcome.observed})"
    return Item(kind, name, "unknown", UNKNOWN, f"{f.outcome.observed}; {f.outcome.remedy}")


def _resources(ctx: Context, stack: str, known: Mapping[str, Describer]) -> List[Item]:
    items: List[Item] = []
    for r in paginate(ctx.client("cloudformation"), "list_stack_resources", "StackResourceSummaries", StackName=stack):
        rtype, pid, rstatus = r.get("ResourceType", ""), r.get("PhysicalResourceId", ""), r.get("ResourceStatus", "")
        logical = r.get("LogicalResourceId", "")
        if rstatus.endswith("_FAILED"):
            items.append(Item(rtype, logical, rstatus, BAD, r.get("ResourceStatusReason", ""), logical))
            continue
        service, describe = known.get(rtype, ("", None))
        if describe is None or not pid or rstatus.startswith("DELETE_"):
            continue
        if ctx.stopped:
            items.append(Item(rtype, pid, "unknown", UNKNOWN, f"not read: {ctx.stopped}", logical))
            continue
        try:
            described = describe(ctx, pid)
        except Exception as e:  # noqa: BLE001 - a resource that cannot be read is an answer
            described = _unknown(rtype, pid, e, service, ctx)
        if described is None:
            continue  # nothing to say of it (a bucket without node reports)
        item = described
        item.logical_id = logical
        items.append(item)
    return items


def _stack(ctx: Context, part: str, known: Mapping[str, Describer]) -> StackState:
    name = ctx.spec.stack_name(part)
    cfn = ctx.client("cloudformation")
    try:
        s = cfn.describe_stacks(StackName=name)["Stacks"][0]
    except ClientError as e:
        if has_code(e, "ValidationError") and "does not exist" in str(e):
            return StackState(name, part, "not deployed", ABSENT)
        raise
    state = s.get("StackStatus", "?")
    updated = fmt_time(s.get("LastUpdatedTime") or s.get("CreationTime") or "")
    st = StackState(name, part, state, stackhealth(state), s.get("StackStatusReason", ""), updated)
    st.resources = _resources(ctx, name, known)
    return st


def collect_status(
    spec: ClusterSpec, aws: AwsClients, *, label: str = "", progress: Optional[Progress] = None,
    ctx: Optional[Context] = None, deadline_s: Optional[float] = None,
    registered: Mapping[str, Describer] = MappingProxyType({}),
) -> ClusterStatus:
    """Each stack and what it holds, the whole run within `deadline_s` seconds (None: unbounded, for tests); each
    stack is reported as it is read. A fault that makes later calls pointless (an endpoint that never answers, the
    deadline) ends the run: the stacks after it are unknown, never ok. `registered` describe the orchestrator
    kinds' and the stores' resources (`fmcluster.registry.status_describers`)."""
    ctx = ctx or Context(spec=spec, aws=aws)
    known = describers(registered)
    if deadline_s is not None:
        ctx.deadline = time.monotonic() + deadline_s
    out = ClusterStatus(label or spec.name, aws.region, None)
    finished, ident, exc = bounded(lambda: ctx.client("sts").get_caller_identity(), ctx.remaining())
    if not finished or exc is not None:
        f = classify(exc, "sts", attempts=max_attempts()) if exc is not None else past_deadline("status", deadline_s)
        out.error = {"status": ERROR, "observed": f.outcome.observed, "remedy": f.outcome.remedy}
        return out
    out.account = str(ident["Account"])
    for part in STACK_PARTS:
        name = spec.stack_name(part)
        if ctx.stopped:
            out.stacks.append(StackState(name, part, "unknown", UNKNOWN, f"not read: {ctx.stopped}"))
            continue
        finished, st, exc = bounded(lambda part=part: _stack(ctx, part, known), ctx.remaining())  # type: ignore[misc]
        if not finished:
            f = past_deadline("status", deadline_s)
            ctx.stopped = f.outcome.observed
            st = StackState(name, part, "unknown", UNKNOWN, f"{f.outcome.observed}; {f.outcome.remedy}")
        elif exc is not None:
            item = _unknown("stack", name, exc, "cloudformation", ctx)
            st = StackState(item.name, part, "unknown", UNKNOWN, item.detail)
        out.stacks.append(st)
        if progress:
            progress(f"status: {_mark(st.health).strip() or '-'} {name} {st.state}")
    return out

"""Reserved capacity: On-Demand Capacity Reservations, Capacity Blocks and HyperPod training plans."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from botocore.exceptions import ClientError

from fmcluster.aws.context import Context, as_utc, fmt_time, has_code
from fmcluster.aws.results import FAIL, PASS, WARN, Outcome
from fmcluster.runtime.contract import ml_type

LINUX_PLATFORM = "Linux/UNIX"
ENDS_SOON = timedelta(hours=24)
CR_ACTIVE = "active"
CR_NOT_YET = {"scheduled", "payment-pending", "pending", "assessing", "delayed"}
TP_NOT_YET = {"Pending", "Scheduled"}
# A reserved-capacity summary holds instances only while its own status is one of these (ReservedCapacityStatus:
# Pending | Active | Scheduled | Expired | Failed); Pending ones are bought but not confirmed yet: "not yet".
RC_HOLDING = frozenset({"Active", "Scheduled"})
RC_NOT_YET = frozenset({"Pending"})


def _groups_for(ctx: Context, attr: str, value: str) -> List[Any]:
    return [g for g in ctx.spec.node_groups if getattr(g.capacity, attr) == value]


def _verdict(problems: List[str], warnings: List[str], observed: str, expected: str, fix: List[str]) -> Outcome:
    if problems:
        return Outcome(FAIL, observed + "; " + "; ".join(problems + warnings), expected, "; ".join(fix))
    if warnings:
        return Outcome(WARN, observed + "; " + "; ".join(warnings), expected, "; ".join(fix))
    return Outcome(PASS, observed, expected)


def check_reservation(ctx: Context, reservation_id: str) -> Outcome:
    """An ODCR or Capacity Block: exists, usable, and matches type, AZ, platform, size and time."""
    groups = _groups_for(ctx, "reservation_id", reservation_id)
    kind = groups[0].capacity.type
    types = sorted({g.instance_type for g in groups})
    need = sum(g.max_size for g in groups)  # an elastic group on an ODCR may grow to max_count
    az = ctx.spec.availability_zone
    expected = f"{kind} for {need} x {'/'.join(types)} ({LINUX_PLATFORM}) in {az}, usable now"
    try:
        found = ctx.client("ec2").describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    except ClientError as e:
        if has_code(e, "InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"):
            return Outcome(FAIL, f"{reservation_id} not found in {ctx.region} for account {ctx.account or '?'}",
                           expected, "check the id, the region and the account (a shared reservation must be "
                           "shared with this account through AWS RAM)")
        raise
    cr = found["CapacityReservations"][0]
    rtype = cr.get("ReservationType", "default")
    state = cr.get("State", "?")
    total, avail = int(cr.get("TotalInstanceCount", 0)), int(cr.get("AvailableInstanceCount", 0))
    end, start = as_utc(cr.get("EndDate")), as_utc(cr.get("StartDate"))
    observed = (f"{rtype} reservation {state}: {total} x {cr.get('InstanceType')} ({cr.get('InstancePlatform')}) "
                f"in {cr.get('AvailabilityZone')}, {avail} available"
                + (f", ends {fmt_time(end)}" if end else ", no end date"))
    problems: List[str] = []
    warnings: List[str] = []
    fix: List[str] = []
    want_type = "capacity-block" if kind == "capacity-block" else "default"
    if rtype != want_type:
        problems.append(f"it is a {'Capacity Block' if rtype == 'capacity-block' else 'capacity reservation'}, "
                        f"the spec says {kind}")
        fix.append(f"set capacity.type to {'capacity-block' if rtype == 'capacity-block' else 'odcr'}")
    if len(types) > 1 or cr.get("InstanceType") != types[0]:
        problems.append(f"groups ask for {', '.join(types)}")
        fix.append(f"use instance_type {cr.get('InstanceType')} in the groups on this reservation")
    if cr.get("AvailabilityZone") != az:
        problems.append(f"the spec's AZ is {az}")
        fix.append(f"set availability_zone to {cr.get('AvailabilityZone')}")
    if cr.get("InstancePlatform") != LINUX_PLATFORM:
        problems.append(f"platform must be {LINUX_PLATFORM}")
        fix.append("reserve Linux/UNIX capacity")
    if cr.get("Tenancy", "default") != "default":
        warnings.append(f"tenancy {cr.get('Tenancy')}: launches must use the same tenancy")
    now = ctx.now()
    if state == CR_ACTIVE:
        if total < need:
            problems.append(f"it holds {total}, the groups need {need}")
            fix.append(f"lower the group counts to {total} or extend the reservation")
        elif avail < need:
            warnings.append(f"only {avail} of {total} free (other instances use it)")
            fix.append("stop the instances using it, or lower the counts")
    elif state in CR_NOT_YET:
        if total < need:
            problems.append(f"it holds {total}, the groups need {need}")
        warnings.append(f"not usable yet (starts {fmt_time(start) if start else '?'})")
        fix.append("deploy the cluster after the start time, or the nodes will not launch")
    else:
        problems.append(f"state {state} cannot launch instances")
        fix.append("buy or create a new reservation and put its id in the spec")
    if end is not None:
        if end <= now:
            problems.append("it has ended")
        elif rtype == "capacity-block" and end - now < ENDS_SOON:
            warnings.append(f"ends in {(end - now).total_seconds() / 3600:.1f} h; instances are terminated then")
            fix.append("extend the Capacity Block or plan for the end time")
    sizes = {g.capacity.size for g in groups if g.capacity.size is not None}
    if sizes and sizes != {total}:
        warnings.append(f"spec capacity.size {', '.join(map(str, sorted(sizes)))} != reservation size {total}")
        fix.append(f"set capacity.size to {total}")
    bound = (cr.get("PlacementGroupArn") or "").split("/")[-1] or None
    named = {g.existing_placement_group for g in groups}
    if bound and named != {bound}:
        # instances of a reservation made in a cluster placement group must launch into that group
        problems.append(f"the reservation is bound to placement group {bound}; the groups name "
                        f"{', '.join(sorted(str(n) for n in named))}")
        fix.append(f"set placement: {{existing_group: {bound}}} on the groups using it")
    elif not bound and named != {None}:
        warnings.append(f"the reservation is open (no placement group); the groups launch into "
                        f"{', '.join(sorted(str(n) for n in named if n))}, which can only narrow where they fit")
        fix.append("leave placement out for an open reservation")
    if cr.get("InstanceMatchCriteria") == "targeted":
        observed += ", targeted"
    return _verdict(problems, warnings, observed, expected, fix)


def _concurrent(segments: List[Tuple[Optional[datetime], Optional[datetime], int]], at: datetime) -> int:
    """Instances held at time `at` by (start, end, count) segments (an open end holds on)."""
    return sum(n for start, end, n in segments if (start is None or start <= at) and (end is None or at < end))


def _segments(summaries: List[Dict[str, Any]], now: datetime, holding: FrozenSet[str]
              ) -> List[Tuple[Optional[datetime], Optional[datetime], int]]:
    segments = [(as_utc(s.get("StartTime")), as_utc(s.get("EndTime")), int(s.get("TotalInstanceCount", 0)))
                for s in summaries if s.get("Status") in holding]
    return [seg for seg in segments if seg[1] is None or seg[1] > now]


def reserved_capacity(summaries: List[Dict[str, Any]], now: datetime, holding: FrozenSet[str] = RC_HOLDING
                      ) -> Tuple[int, int, Optional[datetime]]:
    """(held now or at the first start, most held at once, when that most is first held) for reserved-capacity
    summaries of one instance type and AZ.

    Only summaries whose own status is in `holding` (Active or Scheduled) hold instances, and only between their
    start and end times; a plan made of sequential segments holds each segment's count in turn, never their sum.
    """
    segments = _segments(summaries, now, holding)
    if not segments:
        return 0, 0, None
    # capacity changes only at a segment start: check now and every later start
    moments = sorted({now} | {start for start, _, _ in segments if start is not None and start > now})
    first = next((t for t in moments if _concurrent(segments, t)), moments[0])
    peak_at = max(moments, key=lambda t: (_concurrent(segments, t), -t.timestamp()))
    return _concurrent(segments, first), _concurrent(segments, peak_at), peak_at


def capacity_gap(summaries: List[Dict[str, Any]], want: int, now: datetime) -> Optional[datetime]:
    """When the held capacity first drops below `want` again after reaching it, before the last segment ends
    (a plan with a gap between segments); None without such a gap."""
    segments = _segments(summaries, now, RC_HOLDING)
    ends = [end for _, end, _ in segments if end is not None]
    if not segments or len(ends) < len(segments):
        return None
    last = max(ends)
    moments = sorted({now} | {t for start, end, _ in segments for t in (start, end) if t is not None and now <= t < last})
    reached = False
    for t in moments:
        held = _concurrent(segments, t)
        if held >= want:
            reached = True
        elif reached:
            return t
    return None


def check_training_plan(ctx: Context, arn: str) -> Outcome:
    groups = _groups_for(ctx, "training_plan_arn", arn)
    name = arn.split("/")[-1]
    az = ctx.spec.availability_zone
    need = sum(g.count for g in groups)
    ml_types = sorted({ml_type(g.instance_type) for g in groups})
    expected = f"an Active plan for HyperPod with {need} x {'/'.join(ml_types)} in {az}"
    try:
        tp = ctx.client("sagemaker").describe_training_plan(TrainingPlanName=name)
    except ClientError as e:
        if has_code(e, "ResourceNotFound", "ResourceNotFoundException", "ValidationException"):
            return Outcome(FAIL, f"training plan {name} not found in {ctx.region}", expected,
                           "check the ARN; training plans are per account and region")
        raise
    status = tp.get("Status", "?")
    end, start = as_utc(tp.get("EndTime")), as_utc(tp.get("StartTime"))
    summaries = tp.get("ReservedCapacitySummaries", [])
    observed = (f"plan {name} {status}: {tp.get('AvailableInstanceCount', '?')} of "
                f"{tp.get('TotalInstanceCount', '?')} instances available"
                + (f", {fmt_time(start)} to {fmt_time(end)}" if start and end else ""))
    problems: List[str] = []
    warnings: List[str] = []
    fix: List[str] = []
    if status in TP_NOT_YET:
        warnings.append(f"not active yet (starts {fmt_time(start) if start else '?'})")
        fix.append("the HyperPod instance groups get capacity from the start time")
    elif status != "Active":
        problems.append(f"status {status}{': ' + tp['StatusMessage'] if tp.get('StatusMessage') else ''}")
        fix.append("buy a new training plan and put its ARN in the spec")
    if end is not None and end <= ctx.now():
        problems.append("it has ended")
    targets = tp.get("TargetResources", [])
    if targets and "hyperpod-cluster" not in targets:
        problems.append(f"it targets {', '.join(targets)}, not hyperpod-cluster")
        fix.append("buy a plan whose target resource is hyperpod-cluster")
    for ml in ml_types:
        want = sum(g.count for g in groups if ml_type(g.instance_type) == ml)
        match = [s for s in summaries if s.get("InstanceType") == ml]
        in_az = [s for s in match if not s.get("AvailabilityZone") or s.get("AvailabilityZone") == az]
        held, peak, peak_at = reserved_capacity(in_az, ctx.now())
        if not match:
            have = sorted({str(s.get("InstanceType")) for s in summaries})
            problems.append(f"no reserved capacity of {ml} (plan holds {', '.join(have) or 'nothing'})")
            fix.append("use the plan's instance type in the groups on it")
        elif not in_az:
            problems.append(f"{ml} capacity is in {', '.join(sorted({str(s.get('AvailabilityZone')) for s in match}))}"
                            f", the spec's AZ is {az}")
            fix.append("set availability_zone to the plan's AZ")
        elif peak < want:
            _, pending_peak, _ = reserved_capacity(in_az, ctx.now(), RC_HOLDING | RC_NOT_YET)
            if pending_peak >= want:  # bought, not confirmed yet: not yet, not never
                warnings.append(f"{peak} x {ml} reserved at once so far, {pending_peak} with the plan's Pending "
                                "capacity (bought, not confirmed yet)")
                fix.append("run preflight again once the Pending capacity is Scheduled or Active")
            else:
                problems.append(f"{peak} x {ml} reserved at once (Active/Scheduled capacity in its time window), "
                                f"the groups need {want}")
                fix.append("lower the group counts or extend the plan")
        elif held < want:
            warnings.append(f"{held} x {ml} held at first, {want} only from {fmt_time(peak_at)}")
            fix.append(f"expect the groups to reach {want} instances from {fmt_time(peak_at)}")
        if match and in_az and peak >= want:
            gap = capacity_gap(in_az, want, ctx.now())
            if gap is not None:
                warnings.append(f"fewer than {want} x {ml} held from {fmt_time(gap)}, before the plan's last segment "
                                "ends (a gap between its segments)")
                fix.append("expect nodes to leave the groups during the gap")
    return _verdict(problems, warnings, observed, expected, fix)

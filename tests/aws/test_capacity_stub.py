"""Capacity reservations, Capacity Blocks and training plans: moto lacks them, so botocore Stubber."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict

import pytest
from helpers.aws import ACCOUNT, AZ, group, make_ctx, make_spec, preflight_checks, stubbed

from fmcluster.aws.capacity import check_reservation, check_training_plan
from fmcluster.aws.context import run_checks

CR = "cr-0123456789abcdef0"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
PLAN_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-plan/big-run"


def reservation(**over: Any) -> Dict[str, Any]:
    cr = {
        "CapacityReservationId": CR, "OwnerId": ACCOUNT, "InstanceType": "p5.48xlarge",
        "InstancePlatform": "Linux/UNIX", "AvailabilityZone": AZ, "Tenancy": "default",
        "TotalInstanceCount": 2, "AvailableInstanceCount": 2, "State": "active",
        "StartDate": NOW - timedelta(days=1), "EndDateType": "unlimited", "InstanceMatchCriteria": "targeted",
        "ReservationType": "default",
    }
    cr.update(over)
    return {"CapacityReservations": [cr]}


def ctx_for(kind: str = "odcr", count: int = 2, **cap: Any) -> Any:
    spec = make_spec(node_groups=[group(count=count, capacity={"type": kind, "reservation_id": CR, **cap})])
    ctx = make_ctx(spec)
    ctx.now = lambda: NOW
    return ctx


def run_reservation(ctx: Any, response: Dict[str, Any]) -> Any:
    stub = stubbed(ctx, "ec2")
    stub.add_response("describe_capacity_reservations", response, {"CapacityReservationIds": [CR]})
    out = check_reservation(ctx, CR)
    stub.assert_no_pending_responses()
    return out


def test_matching_odcr_passes() -> None:
    out = run_reservation(ctx_for(), reservation())
    assert out.status == "pass", out
    assert "default reservation active: 2 x p5.48xlarge (Linux/UNIX) in us-east-1a, 2 available" in out.observed


@pytest.mark.parametrize("over, needle, fix", [
    ({"InstanceType": "p5en.48xlarge"}, "groups ask for p5.48xlarge", "use instance_type p5en.48xlarge"),
    ({"AvailabilityZone": "us-east-1b"}, "the spec's AZ is us-east-1a", "set availability_zone to us-east-1b"),
    ({"InstancePlatform": "Windows"}, "platform must be Linux/UNIX", "reserve Linux/UNIX"),
    ({"TotalInstanceCount": 1, "AvailableInstanceCount": 1}, "it holds 1, the groups need 2", "lower the group"),
    ({"State": "expired", "EndDate": NOW - timedelta(hours=1)}, "state expired cannot launch", "new reservation"),
    ({"ReservationType": "capacity-block"}, "it is a Capacity Block, the spec says odcr", "capacity-block"),
])
def test_mismatches_fail(over: Dict[str, Any], needle: str, fix: str) -> None:
    out = run_reservation(ctx_for(), reservation(**over))
    assert out.status == "fail" and needle in out.observed and fix in out.remedy, out


def test_partly_used_or_size_mismatch_warns() -> None:
    out = run_reservation(ctx_for(), reservation(AvailableInstanceCount=1))
    assert out.status == "warn" and "only 1 of 2 free" in out.observed
    out = run_reservation(ctx_for(size=4), reservation(TotalInstanceCount=4, AvailableInstanceCount=4))
    assert out.status == "pass"
    out = run_reservation(ctx_for(size=2), reservation(TotalInstanceCount=4, AvailableInstanceCount=4))
    assert out.status == "warn" and "spec capacity.size 2 != reservation size 4" in out.observed


def test_a_reservation_made_in_a_placement_group_must_be_named_by_the_groups_using_it() -> None:
    """Instances of an ODCR created in a cluster placement group launch only into that group."""
    pg = f"arn:aws:ec2:us-east-1:{ACCOUNT}:placement-group/theirs"
    out = run_reservation(ctx_for(), reservation(PlacementGroupArn=pg))
    assert out.status == "fail" and "bound to placement group theirs" in out.observed
    assert "placement: {existing_group: theirs}" in out.remedy
    spec = make_spec(node_groups=[group(capacity={"type": "odcr", "reservation_id": CR},
                                        placement={"existing_group": "theirs"})])
    ctx = make_ctx(spec)
    ctx.now = lambda: NOW
    assert run_reservation(ctx, reservation(PlacementGroupArn=pg)).status == "pass"


def test_an_open_reservation_with_a_named_placement_group_warns() -> None:
    spec = make_spec(node_groups=[group(capacity={"type": "odcr", "reservation_id": CR},
                                        placement={"existing_group": "mine"})])
    ctx = make_ctx(spec)
    ctx.now = lambda: NOW
    out = run_reservation(ctx, reservation())
    assert out.status == "warn" and "the reservation is open" in out.observed


def capacity_block(**over: Any) -> Dict[str, Any]:
    fields: Dict[str, Any] = {"ReservationType": "capacity-block", "EndDateType": "limited",
                              "EndDate": NOW + timedelta(days=7)}
    return reservation(**{**fields, **over})


def test_capacity_block_active_passes_and_reports_end() -> None:
    out = run_reservation(ctx_for("capacity-block"), capacity_block())
    assert out.status == "pass" and "ends 2026-12-06 12:00 UTC" in out.observed


def test_capacity_block_ending_soon_or_not_started_warns() -> None:
    over = reservation(ReservationType="capacity-block", EndDate=NOW + timedelta(hours=5))
    out = run_reservation(ctx_for("capacity-block"), over)
    assert out.status == "warn" and "ends in 5.0 h" in out.observed
    out = run_reservation(ctx_for("capacity-block"), capacity_block(State="scheduled", StartDate=NOW + timedelta(days=2)))
    assert out.status == "warn" and "not usable yet (starts 2026-12-01 12:00 UTC)" in out.observed
    assert "after the start time" in out.remedy


def test_capacity_block_ended_fails() -> None:
    out = run_reservation(ctx_for("capacity-block"), capacity_block(EndDate=NOW - timedelta(minutes=1)))
    assert out.status == "fail" and "it has ended" in out.observed


def test_reservation_not_found_fails() -> None:
    ctx = ctx_for()
    stub = stubbed(ctx, "ec2")
    stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", "nope")
    out = check_reservation(ctx, CR)
    assert out.status == "fail" and f"{CR} not found in us-east-1" in out.observed and "AWS RAM" in out.remedy


def test_groups_sharing_a_reservation_add_up() -> None:
    cap = {"type": "odcr", "reservation_id": CR}
    spec = make_spec(node_groups=[group("ga", count=2, capacity=cap), group("gb", count=1, capacity=cap)])
    ctx = make_ctx(spec)
    assert [p.id for p in preflight_checks(spec)].count(f"capacity:{CR}") == 1
    out = run_reservation(ctx, reservation(TotalInstanceCount=2))
    assert out.status == "fail" and "the groups need 3" in out.observed


def test_access_denied_is_a_cannot_check_answer() -> None:
    ctx = ctx_for()
    stub = stubbed(ctx, "ec2")
    stub.add_client_error("describe_capacity_reservations", "UnauthorizedOperation", "not authorized")
    [r] = run_checks(ctx, [p for p in preflight_checks(ctx.spec) if p.id == f"capacity:{CR}"])
    assert r.status == "warn" and r.observed.startswith("cannot check: access denied to ec2:DescribeCapacityReservations")


# --- training plans ---------------------------------------------------------------------------


def plan_ctx(count: int = 2, instance_type: str = "p5.48xlarge") -> Any:
    """A HyperPod spec with a training-plan group."""
    spec = make_spec(orchestrator={"type": "hyperpod-slurm"}, node_groups=[
        group(count=count, instance_type=instance_type,
              capacity={"type": "training-plan", "training_plan_arn": PLAN_ARN})])
    ctx = make_ctx(spec)
    ctx.now = lambda: NOW
    return ctx


def training_plan(**over: Any) -> Dict[str, Any]:
    tp = {
        "TrainingPlanArn": PLAN_ARN, "TrainingPlanName": "big-run", "Status": "Active",
        "StartTime": NOW - timedelta(days=1), "EndTime": NOW + timedelta(days=13),
        "TotalInstanceCount": 2, "AvailableInstanceCount": 2, "InUseInstanceCount": 0,
        "TargetResources": ["hyperpod-cluster"],
        "ReservedCapacitySummaries": [{
            "ReservedCapacityArn": "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc-1",
            "InstanceType": "ml.p5.48xlarge", "TotalInstanceCount": 2, "Status": "Active", "AvailabilityZone": AZ,
        }],
    }
    tp.update(over)
    return tp


def run_plan(ctx: Any, response: Dict[str, Any]) -> Any:
    stub = stubbed(ctx, "sagemaker")
    stub.add_response("describe_training_plan", response, {"TrainingPlanName": "big-run"})
    return check_training_plan(ctx, PLAN_ARN)


def test_training_plan_active_passes() -> None:
    out = run_plan(plan_ctx(), training_plan())
    assert out.status == "pass" and "plan big-run Active: 2 of 2 instances available" in out.observed


def test_training_plan_problems() -> None:
    out = run_plan(plan_ctx(count=3), training_plan())
    assert out.status == "fail" and "2 x ml.p5.48xlarge reserved at once" in out.observed
    assert "the groups need 3" in out.observed
    summary = dict(training_plan()["ReservedCapacitySummaries"][0], AvailabilityZone="us-east-1c")
    out = run_plan(plan_ctx(), training_plan(ReservedCapacitySummaries=[summary]))
    assert out.status == "fail" and "capacity is in us-east-1c" in out.observed
    out = run_plan(plan_ctx(), training_plan(Status="Expired", EndTime=NOW - timedelta(days=1)))
    assert out.status == "fail" and "status Expired" in out.observed
    out = run_plan(plan_ctx(), training_plan(TargetResources=["training-job"]))
    assert out.status == "fail" and "not hyperpod-cluster" in out.observed
    out = run_plan(plan_ctx(), training_plan(Status="Scheduled", StartTime=NOW + timedelta(days=1)))
    assert out.status == "warn" and "not active yet" in out.observed


def test_training_plan_not_found() -> None:
    ctx = plan_ctx()
    stub = stubbed(ctx, "sagemaker")
    stub.add_client_error("describe_training_plan", "ResourceNotFound", "no plan")
    out = check_training_plan(ctx, PLAN_ARN)
    assert out.status == "fail" and "training plan big-run not found" in out.observed


# --- training-plan capacity in time --------------------------------------------


def segment(count: int, start: Any, end: Any, status: str = "Active", n: int = 1) -> Dict[str, Any]:
    return {"ReservedCapacityArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:reserved-capacity/rc-{n}",
            "InstanceType": "ml.p5.48xlarge", "TotalInstanceCount": count, "Status": status, "AvailabilityZone": AZ,
            "StartTime": start, "EndTime": end}


def test_sequential_segments_are_not_concurrent_capacity() -> None:
    day = timedelta(days=1)
    plan = training_plan(TotalInstanceCount=4, ReservedCapacitySummaries=[
        segment(2, NOW - day, NOW + 6 * day, n=1), segment(2, NOW + 6 * day, NOW + 13 * day, "Scheduled", n=2)])
    out = run_plan(plan_ctx(count=4), plan)
    assert out.status == "fail", out
    assert "2 x ml.p5.48xlarge reserved at once" in out.observed and "the groups need 4" in out.observed


def test_expired_and_failed_summaries_hold_nothing() -> None:
    day = timedelta(days=1)
    plan = training_plan(ReservedCapacitySummaries=[
        segment(4, NOW - 9 * day, NOW - 2 * day, "Expired", n=1), segment(4, NOW, NOW + day, "Failed", n=2),
        segment(2, NOW - day, NOW + 13 * day, n=4)])
    out = run_plan(plan_ctx(count=4), plan)
    assert out.status == "fail" and "2 x ml.p5.48xlarge reserved at once" in out.observed, out


def test_pending_capacity_is_not_yet_rather_than_never() -> None:
    """A just-bought plan's summaries are Pending; they hold nothing yet, which warns
    (as the plan's own Pending status does) instead of failing."""
    day = timedelta(days=1)
    plan = training_plan(Status="Pending", StartTime=NOW + day, ReservedCapacitySummaries=[
        segment(4, NOW + day, NOW + 13 * day, "Pending", n=1)])
    out = run_plan(plan_ctx(count=4), plan)
    assert out.status == "warn", out
    assert "0 x ml.p5.48xlarge reserved at once so far, 4 with the plan's Pending capacity" in out.observed
    plan = training_plan(ReservedCapacitySummaries=[segment(2, NOW, NOW + day, "Pending", n=1)])
    out = run_plan(plan_ctx(count=4), plan)
    assert out.status == "fail" and "the groups need 4" in out.observed  # not even with the Pending capacity


def test_a_gap_between_segments_warns() -> None:
    """Review minor 8: 4 now until tomorrow, 4 again in two weeks: the groups lose their nodes in between."""
    day = timedelta(days=1)
    plan = training_plan(TotalInstanceCount=4, ReservedCapacitySummaries=[
        segment(4, NOW - day, NOW + day, n=1), segment(4, NOW + 14 * day, NOW + 20 * day, "Scheduled", n=2)])
    out = run_plan(plan_ctx(count=4), plan)
    assert out.status == "warn", out
    assert "fewer than 4 x ml.p5.48xlarge held from 2026-" in out.observed and "a gap between its segments" in out.observed
    # back-to-back segments are no gap
    plan = training_plan(TotalInstanceCount=4, ReservedCapacitySummaries=[
        segment(4, NOW - day, NOW + day, n=1), segment(4, NOW + day, NOW + 20 * day, "Scheduled", n=2)])
    assert run_plan(plan_ctx(count=4), plan).status == "pass"


def test_an_active_summary_past_its_end_time_holds_nothing() -> None:
    day = timedelta(days=1)
    plan = training_plan(ReservedCapacitySummaries=[segment(2, NOW - 3 * day, NOW - day)])
    out = run_plan(plan_ctx(count=2), plan)
    assert out.status == "fail" and "0 x ml.p5.48xlarge reserved at once" in out.observed, out


def test_overlapping_segments_add_up_and_a_later_peak_warns() -> None:
    day = timedelta(days=1)
    plan = training_plan(ReservedCapacitySummaries=[
        segment(2, NOW - day, NOW + 13 * day, n=1), segment(2, NOW + 2 * day, NOW + 13 * day, "Scheduled", n=2)])
    out = run_plan(plan_ctx(count=4), plan)
    assert out.status == "warn", out
    assert "2 x ml.p5.48xlarge held at first, 4 only from 2026-12-01 12:00 UTC" in out.observed

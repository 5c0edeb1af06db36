"""FSx for Lustre quotas: the two quotas of the spec's deployment type, by their real
codes and names, against file systems of that type only (moto serves the file systems, Stubber the quotas)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import boto3
import pytest
from helpers.aws import REGION, make_ctx, make_spec, preflight_checks, stubbed

pytestmark = pytest.mark.usefixtures("moto")

PERSISTENT_2 = {"L-8F1B9C74": "Lustre Persistent_2 storage capacity", "L-FD6F2F22": "Lustre Persistent_2 file systems"}
SCRATCH = {"L-AD2FC696": "Lustre Scratch storage capacity", "L-C48231E5": "Lustre Scratch file systems"}


def fsx_spec(gib: int, deployment: str = "PERSISTENT_2") -> Any:
    return make_spec(storage={"fsx": {"storage_capacity_gib": gib, "deployment_type": deployment}})


def file_system(gib: int, deployment: str, tags: Optional[List[Dict[str, str]]] = None) -> None:
    extra: Dict[str, Any] = {"Tags": tags} if tags else {}  # the API refuses an empty tag list
    boto3.client("fsx", region_name=REGION).create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=gib, SubnetIds=["subnet-0123456789abcdef0"],
        LustreConfiguration={"DeploymentType": deployment}, **extra)


def fsx_check(ctx: Any) -> Any:
    """The preflight's own quota:fsx check, run directly (an exception stays an exception)."""
    [check] = [p for p in preflight_checks(ctx.spec) if p.id == "quota:fsx"]
    return check.run(ctx)


def run(spec: Any, quotas: Dict[str, str], values: Dict[str, float]) -> Any:
    """check_fsx_quota with get_service_quota answering each code with its real name and `values[code]`."""
    ctx = make_ctx(spec)
    sq = stubbed(ctx, "service-quotas")
    for code, name in quotas.items():
        sq.add_response("get_service_quota", {"Quota": {"ServiceCode": "fsx", "QuotaCode": code, "QuotaName": name,
                                                        "Value": values[code]}},
                        {"ServiceCode": "fsx", "QuotaCode": code})
    out = fsx_check(ctx)
    sq.assert_no_pending_responses()  # exactly the deployment type's two quotas were read
    return out


def test_fsx_quota_only_when_the_spec_has_lustre() -> None:
    assert "quota:fsx" not in [p.id for p in preflight_checks(make_spec())]
    assert "quota:fsx" in [p.id for p in preflight_checks(fsx_spec(38400))]


def test_persistent_2_counts_only_persistent_2_file_systems() -> None:
    file_system(96000, "PERSISTENT_2")
    file_system(50400, "SCRATCH_2")  # other deployment type: its own quotas
    out = run(fsx_spec(38400), PERSISTENT_2, {"L-8F1B9C74": 200000, "L-FD6F2F22": 100})
    assert out.status == "pass", out
    assert "'Lustre Persistent_2 storage capacity' (L-8F1B9C74): quota 200000 GiB, 96000 in use, spec needs 38400" \
        in out.observed
    assert "'Lustre Persistent_2 file systems' (L-FD6F2F22): quota 100 file systems, 1 in use" in out.observed


def test_persistent_2_capacity_warns_and_fails() -> None:
    file_system(96000, "PERSISTENT_2")
    out = run(fsx_spec(38400), PERSISTENT_2, {"L-8F1B9C74": 100800, "L-FD6F2F22": 100})
    assert out.status == "warn" and "raise 'Lustre Persistent_2 storage capacity' to 134400" in out.remedy
    out = run(fsx_spec(4800), PERSISTENT_2, {"L-8F1B9C74": 2400, "L-FD6F2F22": 100})
    assert out.status == "fail" and "'Lustre Persistent_2 storage capacity' to at least 100800" in out.remedy


def test_scratch_uses_the_scratch_quotas_and_ignores_persistent_usage() -> None:
    file_system(96000, "PERSISTENT_2")
    file_system(2400, "SCRATCH_1")  # SCRATCH_1 and SCRATCH_2 share the Scratch quotas
    out = run(fsx_spec(4800, "SCRATCH_2"), SCRATCH, {"L-AD2FC696": 100800, "L-C48231E5": 1})
    assert out.status == "warn", out
    assert "'Lustre Scratch storage capacity' (L-AD2FC696): quota 100800 GiB, 2400 in use" in out.observed
    assert "'Lustre Scratch file systems' (L-C48231E5): quota 1 file systems, 1 in use, spec needs 1" in out.observed


def test_our_own_file_system_is_not_extra_usage() -> None:
    file_system(4800, "PERSISTENT_2", [{"Key": "fmcluster:cluster", "Value": "fm-dev"}])
    out = run(fsx_spec(9600), PERSISTENT_2, {"L-8F1B9C74": 9600, "L-FD6F2F22": 1})
    assert out.status == "pass", out
    assert "ours exists" in out.observed and "quota 1 file systems, 0 in use, spec needs 0" in out.observed


def test_a_quota_missing_in_the_region_warns() -> None:
    ctx = make_ctx(fsx_spec(1200, "SCRATCH_2"))
    sq = stubbed(ctx, "service-quotas")
    for code in SCRATCH:
        sq.add_client_error("get_service_quota", "NoSuchResourceException", "none", expected_params={
            "ServiceCode": "fsx", "QuotaCode": code})
        sq.add_client_error("get_aws_default_service_quota", "NoSuchResourceException", "none")
    out = fsx_check(ctx)
    assert out.status == "warn" and "'Lustre Scratch storage capacity' (L-AD2FC696) not found" in out.observed

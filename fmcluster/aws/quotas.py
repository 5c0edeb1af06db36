"""Service Quotas checks every cluster shares (EC2 On-Demand vCPUs, VPC/EIP; FSx in fsx_quotas.py) and the helpers the
orchestrator kinds' own quota checks use (fmcluster/orchestrators/<kind>/preflight.py).

Codes are used only where they are well known (EC2 vCPU buckets, VPCs per Region, Elastic IPs);
everything else is looked up by quota *name* so no code is invented.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple

from botocore.exceptions import ClientError

from fmcluster import catalog
from fmcluster.aws.context import Context, has_code, paginate
from fmcluster.aws.results import FAIL, PASS, WARN, Outcome
from fmcluster.runtime.contract import ec2_type

# EC2 On-Demand vCPU quotas (service code ec2), by instance family.
EC2_VCPU_QUOTAS: Dict[str, Tuple[str, str, str]] = {
    # key: (quota code, quota name, family pattern)
    "p": ("L-417A185B", "Running On-Demand P instances", r"^p\d"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances", r"^(g\d|vt\d)"),
    "standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
                 r"^(a|c|d|h|i|m|r|t|z)\d"),
}
VPCS_PER_REGION = ("vpc", "L-F678F1CE", "VPCs per Region")
ELASTIC_IPS = ("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs")
# Instances that do not draw on the On-Demand quota.
NOT_ON_DEMAND_LIFECYCLES = {"spot", "scheduled", "capacity-block"}
# Capacity types whose instances count against the On-Demand vCPU quota (ODCR instances do;
# Capacity Blocks and training plans do not).
ON_DEMAND_CAPACITY = ("on-demand", "odcr")


def ec2_quota_bucket(instance_type: str) -> Optional[str]:
    family = ec2_type(instance_type).split(".")[0]
    for key, (_, _, pattern) in EC2_VCPU_QUOTAS.items():
        if re.match(pattern, family):
            return key
    return None


def quota_value(ctx: Context, service: str, code: str) -> Optional[float]:
    """The applied value of a quota, else its AWS default; None when the region has no such quota."""
    sq = ctx.client("service-quotas")
    try:
        return float(sq.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])
    except ClientError as e:
        if not has_code(e, "NoSuchResourceException"):
            raise
    try:
        return float(sq.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])
    except ClientError as e:
        if has_code(e, "NoSuchResourceException"):
            return None
        raise


def service_quotas(ctx: Context, service: str) -> List[Dict[str, Any]]:
    """Every quota of a service with its applied value, defaults filling in unapplied ones (cached)."""
    key = f"quotas:{service}"
    if key not in ctx.cache:
        sq = ctx.client("service-quotas")
        applied = paginate(sq, "list_service_quotas", "Quotas", ServiceCode=service)
        names = {q.get("QuotaName") for q in applied}
        try:
            defaults = paginate(sq, "list_aws_default_service_quotas", "Quotas", ServiceCode=service)
        except ClientError as e:
            if not has_code(e, "NoSuchResourceException"):
                raise
            defaults = []
        ctx.cache[key] = applied + [q for q in defaults if q.get("QuotaName") not in names]
    return list(ctx.cache[key])


def named(name: str) -> Callable[[str], bool]:
    """A quota-name matcher for exactly `name` (case and surrounding blanks aside): substring matchers picked
    neighbouring quotas (the Spot total for the on-demand one, per-file-system caps for capacity)."""
    want = " ".join(name.split()).lower()
    return lambda found: " ".join(found.split()).lower() == want


def find_quota(ctx: Context, service: str, match: Callable[[str], bool]) -> Optional[Dict[str, Any]]:
    for q in service_quotas(ctx, service):
        if match(str(q.get("QuotaName", ""))):
            return q
    return None


def judge(need: float, in_use: float, limit: float, what: str, unit: str, name: str, extra: str = "") -> Outcome:
    observed = f"quota {limit:g} {unit}, {in_use:g} in use, spec needs {need:g}{extra}"
    expected = f"{need:g}{' + ' + format(in_use, 'g') + ' in use' if in_use else ''} <= quota"
    if need > limit:
        return Outcome(FAIL, observed, expected,
                       f"request an increase of '{name}' to at least {need + in_use:g} {unit} "
                       f"(Service Quotas console){'; ' + what if what else ''}")
    if need + in_use > limit:
        return Outcome(WARN, observed, expected,
                       f"other instances use {in_use:g} {unit}: stop them or raise '{name}' to {need + in_use:g}")
    return Outcome(PASS, observed, expected)


# --- EC2 On-Demand vCPUs ------------------------------------------------------------------


def ec2_vcpu_demand(spec: Any) -> Dict[str, int]:
    demand: Dict[str, int] = defaultdict(int)
    kind = spec.orchestrator_kind
    if not kind.instances_in_account:  # e.g. HyperPod: instances run in a service account, its quotas apply
        return demand
    for g in spec.node_groups:
        bucket = ec2_quota_bucket(g.instance_type)
        if bucket and g.capacity.type in ON_DEMAND_CAPACITY:
            demand[bucket] += g.count * g.instance.vcpus
    for extra in kind.extra_instances(spec):
        bucket = ec2_quota_bucket(extra.instance_type)
        known = catalog.all_types().get(extra.instance_type)
        if bucket and known:
            demand[bucket] += known.vcpus * extra.count
    return dict(demand)


def _running_vcpus(ctx: Context) -> Dict[str, int]:
    if "running_vcpus" not in ctx.cache:
        used: Dict[str, int] = defaultdict(int)
        ec2 = ctx.client("ec2")
        filters = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        for r in paginate(ec2, "describe_instances", "Reservations", Filters=filters):
            for inst in r.get("Instances", []):
                if inst.get("InstanceLifecycle") in NOT_ON_DEMAND_LIFECYCLES:
                    continue
                itype = inst.get("InstanceType", "")
                bucket = ec2_quota_bucket(itype)
                if bucket is None:
                    continue
                known = catalog.all_types().get(itype)
                cpu = inst.get("CpuOptions") or {}
                used[bucket] += known.vcpus if known else cpu.get("CoreCount", 0) * cpu.get("ThreadsPerCore", 1)
        ctx.cache["running_vcpus"] = dict(used)
    return dict(ctx.cache["running_vcpus"])


def check_ec2_vcpus(ctx: Context, bucket: str) -> Outcome:
    code, name, _ = EC2_VCPU_QUOTAS[bucket]
    need = ec2_vcpu_demand(ctx.spec).get(bucket, 0)
    limit = quota_value(ctx, "ec2", code)
    if limit is None:
        return Outcome(WARN, f"quota {code} not found in {ctx.region}", f"'{name}' >= {need} vCPUs",
                       "check the quota in the Service Quotas console")
    in_use = _running_vcpus(ctx).get(bucket, 0)
    return judge(need, in_use, limit, "Capacity Blocks do not count against it", "vCPUs", f"{name}",
                  f" ({code}; on-demand and ODCR groups)")


# --- network quotas -------------------------------------------------------------------------


def check_vpc_quota(ctx: Context) -> Outcome:
    service, code, name = VPCS_PER_REGION
    limit = quota_value(ctx, service, code)
    in_use = len(paginate(ctx.client("ec2"), "describe_vpcs", "Vpcs"))
    if limit is None:
        return Outcome(WARN, f"{in_use} VPCs; quota {code} not found", "room for 1 more VPC",
                       "check 'VPCs per Region' in the Service Quotas console")
    return judge(1, in_use, limit, "", "VPCs", name, f" ({code})")


def check_eip_quota(ctx: Context) -> Outcome:
    service, code, name = ELASTIC_IPS
    limit = quota_value(ctx, service, code)
    in_use = len(ctx.client("ec2").describe_addresses().get("Addresses", []))
    if limit is None:
        return Outcome(WARN, f"{in_use} Elastic IPs; quota {code} not found", "room for the NAT gateway's EIP",
                       "check 'EC2-VPC Elastic IPs' in the Service Quotas console")
    return judge(1, in_use, limit, "the NAT gateway needs one", "Elastic IPs", name, f" ({code})")

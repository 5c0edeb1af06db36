"""Service Quotas checks every cluster shares (EC2 On-Demand vCPUs, VPC/EIP) and the helpers the orchestrator kinds'
and the stores' own quota checks use (their folders' preflight.py).

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
from fmcluster.aws.ownership import is_ours
from fmcluster.aws.results import FAIL, PASS, SKIP, WARN, Outcome
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
# EC2 Instance.InstanceLifecycle (InstanceLifecycleType; absent for On-Demand instances) -> whether the instance
# draws on the On-Demand vCPU quota. Spot instances have Spot quotas and Capacity Blocks do not count (EC2 user
# guide); no AWS document exempts instances in an interruptible Capacity Reservation, so they are counted and named
# (docs/preflight.md). A value this table lacks is counted and named too.
ON_DEMAND_QUOTA_BY_LIFECYCLE: Dict[Optional[str], bool] = {
    None: True,
    "spot": False,
    "scheduled": False,
    "capacity-block": False,
    "interruptible-capacity-reservation": True,
}
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
    """Every quota of a service with its applied value, defaults filling in unapplied ones (cached).

    A service code Service Quotas does not know in this region (NoSuchResourceException) has no quotas:
    `unknown_service` then says so, and the checks that need it skip."""
    key = f"quotas:{service}"
    if key not in ctx.cache:
        sq = ctx.client("service-quotas")
        try:
            applied = paginate(sq, "list_service_quotas", "Quotas", ServiceCode=service)
        except ClientError as e:
            if not has_code(e, "NoSuchResourceException"):
                raise
            ctx.cache[key] = []
            ctx.cache[f"unknown-service:{service}"] = True
            return []
        names = {q.get("QuotaName") for q in applied}
        try:
            defaults = paginate(sq, "list_aws_default_service_quotas", "Quotas", ServiceCode=service)
        except ClientError as e:
            if not has_code(e, "NoSuchResourceException"):
                raise
            defaults = []
        ctx.cache[key] = applied + [q for q in defaults if q.get("QuotaName") not in names]
    return list(ctx.cache[key])


def unknown_service(ctx: Context, service: str, what: str) -> Optional[Outcome]:
    """A skip for a check of `what` when Service Quotas has no service code `service` here, else None."""
    service_quotas(ctx, service)
    if not ctx.cache.get(f"unknown-service:{service}"):
        return None
    return Outcome(SKIP, f"Service Quotas knows no service code '{service}' in {ctx.region}", what,
                   f"check {what} in the {service} console or documentation")


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
    if not kind.nodes.in_account:  # e.g. HyperPod: instances run in a service account, its quotas apply
        return demand
    for g in spec.node_groups:
        bucket = ec2_quota_bucket(g.instance_type)
        if bucket and g.capacity.type in ON_DEMAND_CAPACITY:
            demand[bucket] += g.max_size * g.instance.vcpus  # an elastic group may grow to max_count
    for extra in kind.extra_instances(spec):
        bucket = ec2_quota_bucket(extra.instance_type)
        known = catalog.all_types().get(extra.instance_type)
        if bucket and known:
            demand[bucket] += known.vcpus * extra.count
    return dict(demand)


def ec2_unmapped_types(spec: Any) -> List[str]:
    """Instance types the spec runs On-Demand whose family no entry of `EC2_VCPU_QUOTAS` covers."""
    kind = spec.orchestrator_kind
    if not kind.nodes.in_account:
        return []
    types = {g.instance_type for g in spec.node_groups if g.capacity.type in ON_DEMAND_CAPACITY}
    types |= {e.instance_type for e in kind.extra_instances(spec)}
    return sorted(t for t in types if ec2_quota_bucket(t) is None)


def check_ec2_unmapped(ctx: Context, instance_type: str) -> Outcome:
    family = ec2_type(instance_type).split(".")[0]
    return Outcome(WARN, f"fmcluster maps no EC2 On-Demand vCPU quota to the {family} family ({instance_type}): "
                   "not checked", f"the On-Demand vCPU quota of {family} instances checked",
                   f"find the 'Running On-Demand ... instances' quota that covers {family} in the Service Quotas "
                   "console (EC2) and compare it with the vCPUs of the groups")


def _running_vcpus(ctx: Context) -> Dict[str, int]:
    """vCPUs of this region's pending and running instances per quota bucket, On-Demand ones only
    (`ON_DEMAND_QUOTA_BY_LIFECYCLE`), other than this cluster's own (`ownership.is_ours`: the demand already counts
    them); ``ctx.cache["counted_lifecycles"]`` names the other lifecycles counted."""
    if "running_vcpus" not in ctx.cache:
        used: Dict[str, int] = defaultdict(int)
        named_lifecycles: Dict[str, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
        ec2 = ctx.client("ec2")
        filters = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        for r in paginate(ec2, "describe_instances", "Reservations", Filters=filters):
            for inst in r.get("Instances", []):
                if is_ours(inst.get("Tags", []), ctx.spec, "cluster"):
                    continue  # this cluster's own nodes (a re-run after deploy): the demand counts them already
                lifecycle = inst.get("InstanceLifecycle")
                if not ON_DEMAND_QUOTA_BY_LIFECYCLE.get(lifecycle, True):
                    continue
                itype = inst.get("InstanceType", "")
                bucket = ec2_quota_bucket(itype)
                if bucket is None:
                    continue
                known = catalog.all_types().get(itype)
                cpu = inst.get("CpuOptions") or {}
                vcpus = known.vcpus if known else cpu.get("CoreCount", 0) * cpu.get("ThreadsPerCore", 1)
                used[bucket] += vcpus
                if lifecycle is not None:
                    named_lifecycles[bucket][str(lifecycle)] += vcpus
        ctx.cache["running_vcpus"] = dict(used)
        ctx.cache["counted_lifecycles"] = {b: dict(v) for b, v in named_lifecycles.items()}
    return dict(ctx.cache["running_vcpus"])


def check_ec2_vcpus(ctx: Context, bucket: str) -> Outcome:
    code, name, _ = EC2_VCPU_QUOTAS[bucket]
    need = ec2_vcpu_demand(ctx.spec).get(bucket, 0)
    limit = quota_value(ctx, "ec2", code)
    if limit is None:
        return Outcome(WARN, f"quota {code} not found in {ctx.region}", f"'{name}' >= {need} vCPUs",
                       "check the quota in the Service Quotas console")
    in_use = _running_vcpus(ctx).get(bucket, 0)
    counted = ctx.cache.get("counted_lifecycles", {}).get(bucket, {})
    note = "".join(f"; in use includes {n} vCPUs of {lc} instances (counted: docs/preflight.md)"
                   for lc, n in sorted(counted.items()))
    return judge(need, in_use, limit, "Capacity Blocks do not count against it", "vCPUs", f"{name}",
                  f" ({code}; on-demand and ODCR groups){note}")


# --- network quotas -------------------------------------------------------------------------


OWN_EXISTS = "; the cluster's own {what} exists: neither in use nor needed"


def _others(ctx: Context, resources: List[Dict[str, Any]]) -> Tuple[int, bool]:
    """(how many of `resources` are not this cluster's, whether one is): a re-run after deploy finds the network
    stack's own VPC and NAT address, which need no room any more."""
    ours = sum(1 for r in resources if is_ours(r.get("Tags", []), ctx.spec, "network"))
    return len(resources) - ours, ours > 0


def check_vpc_quota(ctx: Context) -> Outcome:
    service, code, name = VPCS_PER_REGION
    limit = quota_value(ctx, service, code)
    in_use, deployed = _others(ctx, paginate(ctx.client("ec2"), "describe_vpcs", "Vpcs"))
    need = 0 if deployed else 1
    extra = f" ({code}{OWN_EXISTS.format(what='VPC') if deployed else ''})"
    if limit is None:
        return Outcome(WARN, f"{in_use} VPCs; quota {code} not found", f"room for {need} more VPC",
                       "check 'VPCs per Region' in the Service Quotas console")
    return judge(need, in_use, limit, "", "VPCs", name, extra)


def check_eip_quota(ctx: Context) -> Outcome:
    service, code, name = ELASTIC_IPS
    limit = quota_value(ctx, service, code)
    in_use, deployed = _others(ctx, ctx.client("ec2").describe_addresses().get("Addresses", []))
    need = 0 if deployed else 1
    extra = f" ({code}{OWN_EXISTS.format(what='NAT address') if deployed else ''})"
    if limit is None:
        return Outcome(WARN, f"{in_use} Elastic IPs; quota {code} not found", "room for the NAT gateway's EIP",
                       "check 'EC2-VPC Elastic IPs' in the Service Quotas console")
    return judge(need, in_use, limit, "the NAT gateway needs one", "Elastic IPs", name, extra)

"""Preflight checks of AWS PCS: the service answers, the cluster quota, and the login node's AMI."""

from __future__ import annotations

from functools import partial
from typing import Any, List

from fmcluster import catalog
from fmcluster.aws.context import Context, PreflightCheck, paginate
from fmcluster.aws.preflight import check_ami
from fmcluster.aws.quotas import find_quota, judge
from fmcluster.aws.results import PASS, Outcome
from fmcluster.orchestrators.pcs.settings import settings_of


def checks(spec: Any) -> List[PreflightCheck]:
    settings = settings_of(spec).pcs
    found = [PreflightCheck("quota:pcs", "AWS PCS availability and quota", "pcs", check_pcs)]
    if settings.login_ami_id:
        login = catalog.get(settings.login_instance_type)
        found.append(PreflightCheck("ami:pcs-login", "AMI of the PCS login node", "ec2", partial(
            check_ami, ami=settings.login_ami_id, arch=login.architecture, instance_type=settings.login_instance_type)))
    return found


def check_pcs(ctx: Context) -> Outcome:
    pcs = ctx.client("pcs")
    clusters = paginate(pcs, "list_clusters", "clusters")
    others = [c for c in clusters if c.get("name") != ctx.spec.name]
    q = find_quota(ctx, "pcs", lambda n: "clusters" in n.lower() and "per" in n.lower()
                   and "node" not in n.lower())
    if q is None:
        return Outcome(PASS, f"AWS PCS answers in {ctx.region}; {len(others)} other cluster(s); "
                       "no cluster-count quota found by name", "PCS available")
    limit = float(q["Value"])
    return judge(1, len(others), limit, "", "clusters", q["QuotaName"], " (looked up by name)")

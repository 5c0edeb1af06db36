"""The Amazon Managed Service for Prometheus workspace quota (service code ``aps``): the observability stack
creates one workspace per cluster.

The quota is looked up by its name, "Workspaces per region" (the AMP user guide's "Service quotas" table lists
the workspace quota; the spelling of the Service Quotas name is docs/preflight.md's, unconfirmed in the console):
no public source pins its code.
"""

from __future__ import annotations

from fmcluster.aws.context import Context, paginate
from fmcluster.aws.ownership import is_ours
from fmcluster.aws.quotas import find_quota, judge, named, unknown_service
from fmcluster.aws.results import WARN, Outcome

SERVICE = "aps"
WORKSPACES_QUOTA = "Workspaces per region"


def check_amp_workspaces(ctx: Context) -> Outcome:
    skip = unknown_service(ctx, SERVICE, f"'{WORKSPACES_QUOTA}' (AMP)")
    if skip is not None:
        return skip
    workspaces = paginate(ctx.client("amp"), "list_workspaces", "workspaces")
    ours = [w for w in workspaces if is_ours(w.get("tags") or {}, ctx.spec, "observability")]
    others = len(workspaces) - len(ours)
    q = find_quota(ctx, SERVICE, named(WORKSPACES_QUOTA))
    if q is None:
        return Outcome(WARN, f"{others} other AMP workspace(s); no '{SERVICE}' quota named '{WORKSPACES_QUOTA}'",
                       f"'{WORKSPACES_QUOTA}' > {others}",
                       f"check the AMP workspace quota in the Service Quotas console ({SERVICE})")
    mine = "; ours exists" if ours else ""
    return judge(0 if ours else 1, others, float(q["Value"]), "", "workspaces", str(q["QuotaName"]),
                 f" ({q.get('QuotaCode', '?')}, looked up by name){mine}")

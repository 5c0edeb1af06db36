"""`fmcluster status` for AWS ParallelCluster: the provider (a nested stack), the cluster (its own stack, head
node and compute instances) and the validation messages of its last create or update."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Dict, List

from botocore.exceptions import ClientError

from fmcluster.aws.context import Context, has_code, paginate
from fmcluster.aws.status import BAD, OK, PENDING, WARN, Describer, Item, health, stackhealth
from fmcluster.orchestrators.parallelcluster.settings import VALIDATION_MESSAGES_OUTPUT

PROVIDER_DESCRIPTION = "AWS ParallelCluster Cluster Custom Resource Provider"
# Tags ParallelCluster puts on the instances it launches.
CLUSTER_TAG = "parallelcluster:cluster-name"
NODE_TYPE_TAG = "parallelcluster:node-type"
VERSION_TAG = "parallelcluster:version"
LEVEL_HEALTH = {"ERROR": BAD, "WARNING": WARN, "INFO": OK}
INSTANCE_OK = {"running"}
INSTANCE_PENDING = {"pending"}


def _describe_stack(ctx: Context, name: str) -> Dict[str, Any]:
    return dict(ctx.client("cloudformation").describe_stacks(StackName=name)["Stacks"][0])


def _nested_stack(ctx: Context, pid: str) -> Item:
    s = _describe_stack(ctx, pid)
    state = s.get("StackStatus", "?")
    outputs = {o.get("OutputKey"): o.get("OutputValue", "") for o in s.get("Outputs", [])}
    provider = s.get("Description", "").startswith(PROVIDER_DESCRIPTION)
    detail = s.get("StackStatusReason", "")
    if provider and outputs.get("ServiceToken"):
        detail = (detail + "; " if detail else "") + f"function {outputs['ServiceToken'].rsplit(':', 1)[-1]}"
    return Item("ParallelCluster provider" if provider else "nested stack", s.get("StackName", pid), state,
                stackhealth(state), detail)


def validation_messages(ctx: Context) -> List[Dict[str, str]]:
    """The last create or update's validation messages, as the cluster stack's output carries them."""
    try:
        s = _describe_stack(ctx, ctx.spec.stack_name("cluster"))
    except ClientError as e:
        if has_code(e, "ValidationError"):
            return []
        raise
    raw = next((o.get("OutputValue", "") for o in s.get("Outputs", []) if o.get("OutputKey") == VALIDATION_MESSAGES_OUTPUT),
               "")
    truncated = raw.startswith("TRUNCATED:")
    text = raw[len("TRUNCATED:"):] if truncated else raw
    try:
        messages = json.loads(text) if text else []
    except ValueError:
        # cut short: every message that is still whole keeps its level (an ERROR must not hide behind the cut)
        whole: List[Dict[str, str]] = []
        for match in re.finditer(r"\{[^{}]*\}", text):
            try:
                found = json.loads(match.group(0))
            except ValueError:
                continue
            if isinstance(found, dict) and "level" in found:
                whole.append(found)
        return whole + [{"level": "WARNING", "type": "fmcluster", "message": f"validation messages cut short after "
                         f"{len(whole)} whole ones: pcluster describe-cluster shows them all"}]
    return [m for m in messages if isinstance(m, dict)]


def _instances(ctx: Context, cluster: str, node_type: str) -> List[Dict[str, Any]]:
    filters = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]}, {"Name": f"tag:{NODE_TYPE_TAG}", "Values": [node_type]},
               {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}]
    found: List[Dict[str, Any]] = []
    for r in paginate(ctx.client("ec2"), "describe_instances", "Reservations", Filters=filters):
        found.extend(r.get("Instances", []))
    return found


def _cluster(ctx: Context, pid: str) -> Item:
    try:
        s = _describe_stack(ctx, pid)
    except ClientError as e:
        if has_code(e, "ValidationError") and "does not exist" in str(e):
            return Item("ParallelCluster cluster", pid, "no stack", BAD,
                        f"ParallelCluster's stack {pid} does not exist: the provider failed before creating it (see the "
                        "cluster stack's events)")
        raise
    state = s.get("StackStatus", "?")
    tags = {t.get("Key"): t.get("Value") for t in s.get("Tags", [])}
    detail = "; ".join(x for x in (f"ParallelCluster {tags[VERSION_TAG]}" if VERSION_TAG in tags else "",
                                   s.get("StackStatusReason", "")) if x)
    item = Item("ParallelCluster cluster", pid, state, stackhealth(state), detail)
    heads = _instances(ctx, pid, "HeadNode")
    if not heads:
        item.children.append(Item("head node", "-", "none", PENDING if state.endswith("_IN_PROGRESS") else BAD))
    for h in heads:
        hs = h.get("State", {}).get("Name", "?")
        item.children.append(Item("head node", h.get("InstanceId", "?"), hs, health(hs, INSTANCE_OK, INSTANCE_PENDING),
                                  f"{h.get('InstanceType', '')} {h.get('PrivateIpAddress', '')}".strip()))
    computes = Counter(i.get("State", {}).get("Name", "?") for i in _instances(ctx, pid, "Compute"))
    if computes:
        healths = {health(st, INSTANCE_OK, INSTANCE_PENDING) for st in computes}
        worst = BAD if BAD in healths else PENDING if PENDING in healths else OK
        item.children.append(Item("compute instances", str(sum(computes.values())),
                                  ", ".join(f"{n} {st}" for st, n in sorted(computes.items())), worst))
    for m in validation_messages(ctx):
        level = str(m.get("level", "?"))
        item.children.append(Item("validation", str(m.get("type", "?")), level, LEVEL_HEALTH.get(level, WARN),
                                  str(m.get("message", ""))[:300]))
    return item


DESCRIBERS: Dict[str, Describer] = {
    "AWS::CloudFormation::Stack": ("cloudformation", _nested_stack),
    "Custom::PclusterCluster": ("cloudformation", _cluster),
}

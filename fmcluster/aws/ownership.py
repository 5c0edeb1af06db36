"""Which AWS resources belong to this cluster: preflight must not count our own cluster or file system as
"another one" against a quota.

Two marks identify them, both written at deploy time:

- ``fmcluster:cluster = <spec.name>``: `fmcluster.app.build_app` tags every resource of every stack with it;
- ``aws:cloudformation:stack-name = <spec.stack_name(part)>``: CloudFormation's own system tag, on the resources
  of services whose CloudFormation resource declares ``cloudFormationSystemTags`` (AWS PCS clusters do,
  per the AWS::PCS::Cluster resource schema).

Physical names cannot be used: CloudFormation generates the PCS cluster's name, not ``spec.name``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Union

CLUSTER_TAG = "fmcluster:cluster"
STACK_NAME_TAG = "aws:cloudformation:stack-name"

Tags = Union[Mapping[str, str], Iterable[Mapping[str, Any]]]


def tag_map(tags: Tags) -> Dict[str, str]:
    """Tags as a dict, whether the API returns ``{"k": "v"}`` (PCS) or ``[{"Key": k, "Value": v}]`` (EC2, and most services)."""
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items()}
    return {str(t.get("Key")): str(t.get("Value", "")) for t in tags}


def is_ours(tags: Tags, spec: Any, stack_part: str) -> bool:
    """True when `tags` mark a resource of `spec`'s cluster (``stack_part``: the stack that creates it)."""
    found = tag_map(tags)
    return found.get(CLUSTER_TAG) == spec.name or found.get(STACK_NAME_TAG) == spec.stack_name(stack_part)

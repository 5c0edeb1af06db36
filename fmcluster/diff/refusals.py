"""Replacements CloudFormation cannot carry out: a resource that keeps its custom name.

CloudFormation replaces a resource by creating the new one first and deleting the old one after; with the same
name the create fails, so "You can't perform an update that causes a custom-named resource to be replaced. If you
must replace the resource, specify a new name." (CloudFormation, Name type). The deploy fails and rolls back. A
resource whose logical id changes is the same case: the new logical id is created during the update, the old one
deleted in its clean-up afterwards, so a name (or another key the service holds unique, such as an OIDC provider's
URL) that both carry is taken when the create runs.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence, Tuple

NAME_TYPE = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-name.html"

# The property that carries each type's own name (not a parent's, such as a node group's ClusterName).
NAME_PROPERTIES: Dict[str, str] = {
    "AWS::EKS::Cluster": "Name",
    "AWS::EKS::Nodegroup": "NodegroupName",
    "AWS::EKS::Addon": "AddonName",  # one add-on of a name per cluster
    "AWS::PCS::Cluster": "Name",
    "AWS::PCS::ComputeNodeGroup": "Name",
    "AWS::PCS::Queue": "Name",
    "AWS::SageMaker::Cluster": "ClusterName",
    "AWS::SageMaker::ClusterSchedulerConfig": "Name",
    "AWS::SageMaker::ComputeQuota": "Name",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::Role": "RoleName",
    "AWS::APS::RuleGroupsNamespace": "Name",
    "AWS::EC2::LaunchTemplate": "LaunchTemplateName",
    "AWS::EC2::PlacementGroup": "GroupName",
    "AWS::IAM::OIDCProvider": "Url",  # IAM holds one provider per URL in an account
}
# Types whose name is unique within a parent the resource names too (an add-on's name within its cluster).
PARENT_PROPERTIES: Dict[str, str] = {"AWS::EKS::Addon": "ClusterName", "AWS::EKS::Nodegroup": "ClusterName",
                                     "AWS::PCS::ComputeNodeGroup": "ClusterId", "AWS::PCS::Queue": "ClusterId"}

# How to get the change through, per type: the spec edit that gives a new name, or what deleting first costs.
_GROUP = ("rename the group in the spec (node_groups[].name): CloudFormation creates the renamed group beside the old "
          "one, which needs capacity for both while the new one launches, then deletes the old one; or remove the "
          "group from the spec and deploy (its instances are terminated), then add it back with the change")
_CLUSTER = ("destroy the cluster stack first (every instance is terminated; the storage stack and its data stay), then "
            "deploy the change, which creates the cluster again")
WAYS: Dict[str, str] = {
    "AWS::EKS::Nodegroup": _GROUP,
    "AWS::PCS::ComputeNodeGroup": _GROUP,
    "AWS::PCS::Queue": _GROUP,
    "AWS::EKS::Cluster": _CLUSTER,
    "AWS::PCS::Cluster": _CLUSTER,
    "AWS::SageMaker::Cluster": _CLUSTER,
}
_DEFAULT_WAY = "give it a new name, or remove it from the template and deploy first, then deploy the change"


def custom_name(resource_type: str, old: Optional[Dict[str, Any]], new: Optional[Dict[str, Any]]) -> Optional[str]:
    """The custom name a replacement would keep (the same in both templates), or None."""
    prop = NAME_PROPERTIES.get(resource_type)
    if prop is None:
        return None
    before = ((old or {}).get("Properties") or {}).get(prop)
    after = ((new or {}).get("Properties") or {}).get(prop)
    if before is None or before != after:
        return None  # generated names, or a new name: the new resource can be created beside the old one
    return before if isinstance(before, str) else "(a name built from references)"


def _key(resource_type: str, resource: Optional[Dict[str, Any]]) -> Optional[str]:
    """The unique key a resource holds in its service (its name, within its parent where it has one), as text."""
    props = (resource or {}).get("Properties") or {}
    name = props.get(NAME_PROPERTIES.get(resource_type, ""))
    if name is None:
        return None
    parent = props.get(PARENT_PROPERTIES.get(resource_type, ""))
    return json.dumps([parent, name], sort_keys=True)


def moved(changes: Sequence[Any]) -> Dict[str, str]:
    """Per resource added under a new logical id (by its place), the name it keeps from one removed in the same stack:
    the create runs before the old one's deletion, so the service refuses it and the deploy rolls back."""
    removed: Dict[Tuple[str, str, str], Any] = {}
    for c in changes:
        if c.action == "removed":
            key = _key(c.type, c.old)
            if key is not None:
                removed[(c.stack, c.type, key)] = c
    found: Dict[str, str] = {}
    for c in changes:
        if c.action != "added":
            continue
        key = _key(c.type, c.new)
        old = removed.get((c.stack, c.type, key)) if key is not None else None
        if old is not None:
            name = ((c.new or {}).get("Properties") or {}).get(NAME_PROPERTIES[c.type])
            found[c.where] = (f"{c.type} moves from {old.logical_id} to {c.logical_id} under the same "
                              f"{NAME_PROPERTIES[c.type]} {name if isinstance(name, str) else '(built from references)'}: "
                              "the update fails: CloudFormation creates the new logical id before it deletes the old "
                              "one, and the service refuses a second resource with that key; the stack rolls back. Way "
                              "through: keep the resource's logical id (pin it where the construct tree moved it), or "
                              "remove it and deploy, then add it back")
    return found


def refusal(resource_type: str, name: str) -> str:
    return (f"the update fails: CloudFormation cannot replace {resource_type} {name} under the same name: the new "
            f"one is created before the old one is deleted, and the name is taken; the stack rolls back. Way through: "
            f"{WAYS.get(resource_type, _DEFAULT_WAY)}")

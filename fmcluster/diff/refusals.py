"""Replacements CloudFormation cannot carry out: a resource that keeps its custom name.

CloudFormation replaces a resource by creating the new one first and deleting the old one after; with the same
name the create fails, so "You can't perform an update that causes a custom-named resource to be replaced. If you
must replace the resource, specify a new name." (CloudFormation, Name type). The deploy fails and rolls back.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

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
}

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


def refusal(resource_type: str, name: str) -> str:
    return (f"the update fails: CloudFormation cannot replace {resource_type} {name} under the same name: the new "
            f"one is created before the old one is deleted, and the name is taken; the stack rolls back. Way through: "
            f"{WAYS.get(resource_type, _DEFAULT_WAY)}")

"""Task governance from the spec: the cluster policy (AWS::SageMaker::ClusterSchedulerConfig: priority classes, fair
share, idle-compute sharing) and one compute quota per team (AWS::SageMaker::ComputeQuota: GPUs per instance type,
lending and borrowing, preemption). HyperPod's task-governance add-on (its managed Kueue) turns them into a namespace,
a ClusterQueue and a LocalQueue per team and a WorkloadPriorityClass per priority class.

aws-cdk-lib 2.275 has no L1 for ComputeQuota (CfnComputeQuota arrived in 2.276.0), so it is a plain CfnResource of
that type, rendered here and checked against CloudFormation's schema by cfn-lint in the tests. Both resource types
are in the resource schemas cfn-lint bundles (1.58); CloudFormation's docs:
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sagemaker-clusterschedulerconfig.html
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sagemaker-computequota.html
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from aws_cdk import Acknowledgment, CfnResource, Validations
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from fmcluster.orchestrators.hyperpod_eks.settings import TaskGovernance, Team, launcher_quota, team_gpus_by_type
from fmcluster.platforms.ec2.node_builder import construct_id
from fmcluster.spec import ClusterSpec

COMPUTE_QUOTA = "AWS::SageMaker::ComputeQuota"
SHARING = {"lend-and-borrow": "LendAndBorrow", "lend": "Lend", "dont-lend": "DontLend"}
PREEMPTION = {"lower-priority": "LowerPriority", "never": "Never"}


def _enabled(flag: bool) -> str:
    return "Enabled" if flag else "Disabled"


def scheduler_config(governance: TaskGovernance) -> Dict[str, Any]:
    """ClusterSchedulerConfig.SchedulerConfig (CloudFormation property names)."""
    return {
        "PriorityClasses": [{"Name": p.name, "Weight": p.weight} for p in governance.priority_classes],
        "FairShare": _enabled(governance.fair_share),
        "IdleResourceSharing": _enabled(governance.idle_resource_sharing),
    }


def quota_name(cluster: str, team: Team) -> str:
    return f"{cluster}-{team.name}"


def compute_quota(spec: ClusterSpec, team: Team, cluster_arn: str,
                  tags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """AWS::SageMaker::ComputeQuota properties of one team: its GPUs per ml. instance type (accelerators; SageMaker
    fills vCPUs and memory in proportion), a few vCPUs and GiB of the system instance type for its MPI launchers
    (`launcher_quota`; docs/hyperpod-eks.md, "The first job"), how it shares idle compute, whether its tasks preempt
    its own. `tags` (the
    stacks' tags: fmcluster:cluster and the spec's, `OrchestrationContext.instance_tags`) are set here: CDK's tagging
    reaches L1 resources only, and the type is taggable (its CloudFormation schema: Tags, tagOnCreate)."""
    sharing: Dict[str, Any] = {"Strategy": SHARING[team.sharing]}
    if team.borrow_limit_percent is not None:
        sharing["BorrowLimit"] = team.borrow_limit_percent
    target: Dict[str, Any] = {"TeamName": team.name}
    if team.fair_share_weight is not None:
        target["FairShareWeight"] = team.fair_share_weight
    return {
        "Name": quota_name(spec.name, team),
        "ClusterArn": cluster_arn,
        "Description": f"fmcluster {spec.name}: team {team.name}",
        "ActivationState": "Enabled",
        "ComputeQuotaTarget": target,
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": [*({"InstanceType": ml, "Accelerators": gpus}
                                        for ml, gpus in sorted(team_gpus_by_type(spec, team).items())),
                                      launcher_quota(spec)],
            "ResourceSharingConfig": sharing,
            "PreemptTeamTasks": PREEMPTION[team.preempt_team_tasks],
        },
        **({"Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]} if tags else {}),
    }


class TaskGovernanceObjects(Construct):
    """The cluster policy and the teams' compute quotas of one HyperPod cluster (after the cluster: they name its ARN;
    the quotas after the policy, whose fair-share setting their weights serve).

    :param name: the cluster policy's name.
    :param cluster_arn: the HyperPod cluster's ARN.
    :param scheduler: ClusterSchedulerConfig.SchedulerConfig (`scheduler_config`).
    :param quotas: team name -> ComputeQuota properties (`compute_quota`).

    Exposes ``policy`` and ``quotas`` (team name -> CfnResource).
    """

    def __init__(self, scope: Construct, id: str, *, name: str, cluster_arn: str, scheduler: Mapping[str, Any],
                 quotas: Mapping[str, Dict[str, Any]]) -> None:
        super().__init__(scope, id)
        if not quotas:
            raise ValueError("quotas: task governance needs at least one team")
        self.policy = sagemaker.CfnClusterSchedulerConfig(
            self, "Policy", name=name, cluster_arn=cluster_arn, description=f"fmcluster {name}",
            scheduler_config=sagemaker.CfnClusterSchedulerConfig.SchedulerConfigProperty(
                fair_share=scheduler.get("FairShare"), idle_resource_sharing=scheduler.get("IdleResourceSharing"),
                priority_classes=[sagemaker.CfnClusterSchedulerConfig.PriorityClassProperty(name=p["Name"],
                                                                                           weight=p["Weight"])
                                  for p in scheduler.get("PriorityClasses", [])] or None))
        self.quotas: Dict[str, CfnResource] = {}
        for team, properties in quotas.items():
            quota = CfnResource(self, f"{construct_id(team)}Quota", type=COMPUTE_QUOTA, properties=properties)
            quota.node.add_dependency(self.policy)
            # CDK's template validation does not know the type yet (aws-cdk-lib 2.275); CloudFormation and cfn-lint do
            Validations.of(quota).acknowledge(Acknowledgment(
                id="CloudFormation-Validate::F3006",
                reason=f"{COMPUTE_QUOTA} is a CloudFormation resource type (cfn-lint 1.58 schemas) without an L1 in "
                       "aws-cdk-lib 2.275; the tests run cfn-lint over the template"))
            self.quotas[team] = quota

    @property
    def objects(self) -> List[Construct]:
        return [self.policy, *self.quotas.values()]

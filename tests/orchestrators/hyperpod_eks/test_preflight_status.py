"""orchestrator hyperpod-eks: preflight (HyperPod quotas per ml. type with the system group and no controller, the
EKS checks, the VPC CNI version HyperPod requires, the training plan through the common capacity checks) and status
(the HyperPod cluster's instance groups, the cluster policy, the teams' quotas), against botocore Stubber answers
shaped as the APIs return them (moto has no HyperPod task-governance APIs)."""

from __future__ import annotations

from typing import Any, Dict

import pytest
from helpers.aws import ACCOUNT, group, make_ctx, make_spec, stubbed

from fmcluster.aws.preflight import checks_for
from fmcluster.aws.status import describers
from fmcluster.orchestrators.hyperpod_eks import preflight
from fmcluster.orchestrators.hyperpod_eks.versions import TASK_GOVERNANCE, TRAINING_OPERATOR
from fmcluster.platforms.hyperpod import preflight as hyperpod_preflight
from fmcluster.registry import kind_named, kind_of

pytestmark = pytest.mark.usefixtures("moto")
PLAN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-plan/h100-april"


def hp_spec(training_operator: bool = False, kubernetes: str = "1.34", **kw: Any) -> Any:
    kw.setdefault("orchestrator", {
        "type": "hyperpod-eks",
        "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"], "kubernetes_version": kubernetes},
        "hyperpod": {"training_operator": training_operator},
        "task_governance": {"teams": [{"name": "research", "gpus": {"gpu": 8}}]}})
    return make_spec(**kw)


def test_preflight_plans_hyperpod_quotas_eks_checks_and_the_training_plan() -> None:
    spec = hp_spec(node_groups=[group(count=2, capacity={"type": "training-plan", "training_plan_arn": PLAN})])
    ids = [c.id for c in checks_for(spec, kind_of(spec).preflight_checks(spec))]
    for wanted in ("quota:hyperpod:ml.p5.48xlarge", "quota:hyperpod:ml.m5.4xlarge", "quota:hyperpod-instances",
                   "quota:eks-clusters", "eks:version:1.34", "eks:addons", "eks:vpc-cni", "eks:control-plane-az",
                   "training-plan:h100-april"):
        assert any(i == wanted or i.startswith(wanted) for i in ids), wanted
    assert not any(i.startswith("quota:ec2-") for i in ids), "HyperPod's instances run in a SageMaker account"
    assert not any(i.startswith("ami:") for i in ids), "HyperPod picks its own AMI"


def test_hyperpod_demand_counts_the_system_group_and_no_controller() -> None:
    assert hyperpod_preflight.hyperpod_demand(hp_spec()) == {"ml.p5.48xlarge": 2, "ml.m5.4xlarge": 2}


def test_the_addons_checked_follow_the_spec() -> None:
    assert TASK_GOVERNANCE in preflight.addons(hp_spec()) and TRAINING_OPERATOR not in preflight.addons(hp_spec())
    assert TRAINING_OPERATOR in preflight.addons(hp_spec(training_operator=True))
    assert "eks-node-monitoring-agent" not in preflight.addons(hp_spec())


def cni(versions: Dict[str, bool]) -> Dict[str, Any]:
    return {"addons": [{"addonName": "vpc-cni", "addonVersions": [
        {"addonVersion": v, "compatibilities": [{"clusterVersion": "1.34", "defaultVersion": d}]}
        for v, d in versions.items()]}]}


@pytest.mark.parametrize("versions, status, words", [
    ({"v1.22.2-eksbuild.1": True, "v1.18.0-eksbuild.1": False}, "pass", "vpc-cni v1.22.2-eksbuild.1 (default)"),
    ({"v1.18.2-eksbuild.1": True}, "fail", "vpc-cni v1.18.2-eksbuild.1 (default)"),
    ({"v1.18.3-eksbuild.1": True}, "pass", "v1.18.3"),
    ({"v1.20.0-eksbuild.1": False}, "warn", "no default vpc-cni"),
])
def test_the_vpc_cni_hyperpod_requires(versions, status, words) -> None:
    ctx = make_ctx(hp_spec())
    stubbed(ctx, "eks").add_response("describe_addon_versions", cni(versions),
                                     {"addonName": "vpc-cni", "kubernetesVersion": "1.34"})
    out = preflight.check_vpc_cni(ctx)
    assert out.status == status and words in out.observed, out


def test_status_describes_the_cluster_policy_and_team_quotas() -> None:
    ctx = make_ctx(hp_spec())
    sm = stubbed(ctx, "sagemaker")
    sm.add_response("describe_compute_quota", {
        "ComputeQuotaArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:compute-quota/abcdef123456",
        "ComputeQuotaId": "abcdef123456", "Name": "fm-dev-research", "Status": "Created", "ActivationState": "Enabled",
        "ClusterArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/abcdef123456",
        "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge", "Accelerators": 8}]},
        "ComputeQuotaTarget": {"TeamName": "research"}, "ComputeQuotaVersion": 1,
        "CreationTime": "2026-11-30T00:00:00Z"}, {"ComputeQuotaId": "abcdef123456"})
    sm.add_response("describe_cluster_scheduler_config", {
        "ClusterSchedulerConfigArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster-scheduler-config/abcdef654321",
        "ClusterSchedulerConfigId": "abcdef654321", "Name": "fm-dev-policy", "Status": "CreateFailed",
        "FailureReason": "cluster not InService", "ClusterSchedulerConfigVersion": 1,
        "SchedulerConfig": {"FairShare": "Enabled", "PriorityClasses": [{"Name": "training", "Weight": 50}]},
        "CreationTime": "2026-11-30T00:00:00Z"}, {"ClusterSchedulerConfigId": "abcdef654321"})
    service, describe = describers(kind_named("hyperpod-eks").status_describers())["AWS::SageMaker::ComputeQuota"]
    quota = describe(ctx, f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:compute-quota/abcdef123456")
    assert service == "sagemaker" and quota.health == "ok"
    assert "fm-dev-research (team research)" in quota.name and "8 x ml.p5.48xlarge" in quota.state
    _, describe = describers(kind_named("hyperpod-eks").status_describers())["AWS::SageMaker::ClusterSchedulerConfig"]
    policy = describe(ctx, f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster-scheduler-config/abcdef654321")
    assert policy.health == "bad" and policy.detail == "cluster not InService" and "training 50" in policy.state


def test_status_of_the_hyperpod_cluster_shows_instance_group_states() -> None:
    ctx = make_ctx(hp_spec())
    sm = stubbed(ctx, "sagemaker")
    arn = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/abcdef123456"
    sm.add_response("describe_cluster", {
        "ClusterArn": arn, "ClusterName": "fm-dev", "ClusterStatus": "InService", "Orchestrator": {
            "Eks": {"ClusterArn": f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/fm-dev"}},
        "InstanceGroups": [
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 1, "TargetCount": 2,
             "Status": "Degraded"},
            {"InstanceGroupName": "system", "InstanceType": "ml.m5.4xlarge", "CurrentCount": 2, "TargetCount": 2}]},
        {"ClusterName": arn})
    sm.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [
        {"InstanceGroupName": "gpu", "InstanceId": "i-0a", "InstanceType": "ml.p5.48xlarge",
         "LaunchTime": "2026-11-30T00:00:00Z", "InstanceStatus": {"Status": "Running"}},
        {"InstanceGroupName": "system", "InstanceId": "i-0b", "InstanceType": "ml.m5.4xlarge",
         "LaunchTime": "2026-11-30T00:00:00Z", "InstanceStatus": {"Status": "Running"}},
        {"InstanceGroupName": "system", "InstanceId": "i-0c", "InstanceType": "ml.m5.4xlarge",
         "LaunchTime": "2026-11-30T00:00:00Z", "InstanceStatus": {"Status": "Running"}}]},
        {"ClusterName": arn})
    _, describe = describers(kind_named("hyperpod-eks").status_describers())["AWS::SageMaker::Cluster"]
    item = describe(ctx, arn)
    gpu, system = item.children
    assert item.state == "InService" and gpu.health == "bad" and "1/2 ml.p5.48xlarge" in gpu.state
    assert "group Degraded" in gpu.detail and system.health == "ok"


def operator_versions(versions: Dict[str, bool]) -> Dict[str, Any]:
    return {"addons": [{"addonName": TRAINING_OPERATOR, "addonVersions": [
        {"addonVersion": v, "compatibilities": [{"clusterVersion": "1.33", "defaultVersion": d}]}
        for v, d in versions.items()]}]} if versions else {"addons": []}


@pytest.mark.parametrize("kubernetes, versions, status, words", [
    ("1.34", {}, "fail", "not offered for Kubernetes 1.34"),
    ("1.33", {"v1.2.0-eksbuild.1": True}, "pass", "v1.2.0-eksbuild.1"),
    ("1.34", {"v1.3.0-eksbuild.1": True}, "pass", "newer than the page lists (1.28-1.33)"),
])
def test_the_training_operator_exists_for_the_clusters_kubernetes_version(kubernetes, versions, status, words) -> None:
    spec = hp_spec(training_operator=True, kubernetes=kubernetes)
    ctx = make_ctx(spec)
    stubbed(ctx, "eks").add_response("describe_addon_versions", operator_versions(versions),
                                     {"addonName": TRAINING_OPERATOR, "kubernetesVersion": kubernetes})
    out = preflight.check_training_operator(ctx)
    assert out.status == status and words in out.observed, out
    if status == "fail":
        assert "kubernetes_version to 1.33" in out.remedy
    ids = [c.id for c in preflight.checks(spec)]
    assert "eks:training-operator" in ids and "eks:training-operator" not in [c.id for c in preflight.checks(hp_spec())]

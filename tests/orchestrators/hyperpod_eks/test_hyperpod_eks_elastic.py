"""Elastic HyperPod on EKS groups: HyperPod's managed Karpenter (AutoScaling with its ClusterRole, on continuous
provisioning) scales an instance group that starts at 0, within a NodePool limited to max_count nodes' worth; the
spec refuses what HyperPod's autoscaling does not take (a floor above 0, reserved capacity)."""

from __future__ import annotations

import copy
import json

import pytest
from helpers import ROOT, policy_statements, resources_of

from fmcluster.orchestrators.hyperpod_eks import autoscaling
from fmcluster.registry import load_spec, parse_spec
from fmcluster.spec import SpecError

P5 = "hpeks-p5-cluster"


@pytest.fixture(scope="module")
def p5(synth_example):
    return synth_example("hyperpod-eks-p5")[P5]


@pytest.fixture(scope="module")
def example():
    return load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")


def cluster_props(template):
    ((_, cluster),) = resources_of(template, "AWS::SageMaker::Cluster").items()
    return cluster["Properties"]


def test_autoscaling_is_karpenter_with_its_role_on_continuous_provisioning(p5):
    props = cluster_props(p5)
    assert props["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": "Karpenter"}
    assert props["NodeProvisioningMode"] == "Continuous" and props["NodeRecovery"] == "Automatic"
    role_id = props["ClusterRole"]["Fn::GetAtt"][0]
    role = p5["Resources"][role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "hyperpod.sagemaker.amazonaws.com"}}]


def test_the_autoscaling_role_may_only_add_and_remove_cluster_nodes(p5):
    scaling = [s for s in policy_statements(p5) if s.get("Sid") == "ScaleClusterNodes"]
    (statement,) = scaling
    assert sorted(statement["Action"]) == ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"]
    assert ":cluster/*" in json.dumps(statement["Resource"]) and "*" != statement["Resource"]


def test_the_elastic_group_starts_empty_without_deep_health_checks_and_the_static_one_keeps_them(p5):
    groups = {g["InstanceGroupName"]: g for g in cluster_props(p5)["InstanceGroups"]}
    assert groups["prep"]["InstanceCount"] == 0 and "OnStartDeepHealthChecks" not in groups["prep"]
    assert groups["h100"]["InstanceCount"] == 4 and groups["h100"]["OnStartDeepHealthChecks"]


def test_karpenter_gets_a_node_class_and_a_pool_limited_to_max_count(example):
    objects = autoscaling.karpenter_objects(example)
    node_class, pool = objects
    assert node_class == {"apiVersion": "karpenter.sagemaker.amazonaws.com/v1", "kind": "HyperpodNodeClass",
                          "metadata": {"name": "prep"}, "spec": {"instanceGroups": ["prep"]}}
    assert pool["apiVersion"] == "karpenter.sh/v1" and pool["kind"] == "NodePool"
    assert pool["spec"]["limits"] == {"cpu": str(4 * 72)}  # max_count 4 x c5.18xlarge's 72 vCPUs
    template = pool["spec"]["template"]
    assert template["spec"]["nodeClassRef"] == {"group": "karpenter.sagemaker.amazonaws.com",
                                                "kind": "HyperpodNodeClass", "name": "prep"}
    assert template["metadata"]["labels"]["fmcluster.io/node-group"] == "prep"
    assert template["spec"]["startupTaints"] == [
        {"key": "fmcluster.io/node-validation", "value": "pending", "effect": "NoSchedule"}]
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty", "training pods are never moved"


def test_the_karpenter_objects_are_applied_after_the_hyperpod_clusters_autoscaling_is_in_service(p5):
    """After the cluster and after its autoscaling reports InService (test_autoscaling_waiter.py)."""
    manifests = {lid: r for lid, r in resources_of(p5, "Custom::AWSCDK-EKS-KubernetesResource").items()
                 if "HyperpodNodeClass" in json.dumps(r["Properties"]["Manifest"])}
    ((_, manifest),) = manifests.items()
    (cluster_id,) = resources_of(p5, "AWS::SageMaker::Cluster")
    ((ready_id, ready),) = resources_of(p5, "Custom::HyperPodAutoscalingReady").items()
    assert ready_id in manifest["DependsOn"] and cluster_id in ready["DependsOn"]


def test_a_gpu_pool_is_limited_in_gpus(example):
    data = yaml_data(example)
    data["node_groups"][0].update(min_count=0, max_count=8)
    pool = autoscaling.node_pool(parse_spec(data), parse_spec(data).node_groups[0])
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": "64"}


def yaml_data(example):
    return copy.deepcopy(example.model_dump(mode="json", exclude_unset=True, by_alias=True))


@pytest.mark.parametrize("changes, path, words", [
    ({"min_count": 1, "max_count": 4}, "min_count", "floor is 0, not 1"),
    ({"min_count": 0, "max_count": 4, "capacity": {"type": "training-plan",
      "training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-week"}},
     "capacity.type", "On-Demand instance groups only"),
])
def test_what_hyperpod_autoscaling_does_not_take_is_refused_with_its_source(example, changes, path, words):
    data = yaml_data(example)
    data["node_groups"][1].update(changes)
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    lines = [ln for ln in e.value.problems if ln.startswith(f"node_groups[1].{path}: ")]
    assert lines and words in lines[0] and "sagemaker-hyperpod-eks-autoscaling-nodeclass.html" in lines[0], \
        e.value.problems

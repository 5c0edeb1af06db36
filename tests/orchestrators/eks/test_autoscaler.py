"""Elastic EKS node groups: the managed node group's scaling config follows the spec's range, Cluster Autoscaler is
installed on the system nodes at the image of the cluster's Kubernetes minor, its Pod Identity role may scale only
this cluster's tagged Auto Scaling groups, and the elastic groups carry the node-template tags that let it scale up
from zero. Capacity Block groups stay static."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List

import pytest
from helpers import resources_of

from fmcluster.orchestrators.eks.node_groups import scaling_config
from fmcluster.platforms.kubernetes import autoscaler
from fmcluster.platforms.kubernetes.versions import CHARTS, CLUSTER_AUTOSCALER_TAGS, KUBERNETES_VERSIONS
from fmcluster.registry import load_spec, parse_spec
from fmcluster.spec import SpecError

CR = "cr-0123456789abcdef0"
EKS = {"type": "eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"]}}


def eks_spec(**group: Any) -> Dict[str, Any]:
    g = {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2, **group}
    return {"name": "fm-elastic", "region": "us-east-1", "availability_zone": "us-east-1a",
            "orchestrator": copy.deepcopy(EKS), "node_groups": [g]}


@pytest.fixture(scope="module")
def p5(synth_example):
    return synth_example("eks-p5")["eks-p5-cluster"]


def node_groups(template) -> Dict[str, Dict[str, Any]]:
    return {r["Properties"]["NodegroupName"]: r["Properties"]
            for r in resources_of(template, "AWS::EKS::Nodegroup").values()}


def statements(template, role_id_part: str) -> List[Dict[str, Any]]:
    roles = [lid for lid in resources_of(template, "AWS::IAM::Role") if role_id_part in lid]
    assert len(roles) == 1, roles
    return [s for p in resources_of(template, "AWS::IAM::Policy").values()
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if {"Ref": roles[0]} in p["Properties"]["Roles"]]


def test_an_elastic_group_spans_min_count_to_max_count_and_is_deployed_at_count():
    g = parse_spec(eks_spec(count=2, min_count=0, max_count=6)).node_groups[0]
    assert scaling_config(g) == {"min_size": 0, "desired_size": 2, "max_size": 6}


def test_a_static_group_is_count_three_times():
    g = parse_spec(eks_spec(count=3)).node_groups[0]
    assert scaling_config(g) == {"min_size": 3, "desired_size": 3, "max_size": 3}


def test_a_capacity_block_group_asks_for_its_whole_block_from_creation():
    """Its nodes launch when the block starts, with nobody scaling it by hand; min 0 leaves room for EKS's own
    scale-down before the block ends."""
    g = parse_spec(eks_spec(count=4, capacity={"type": "capacity-block", "reservation_id": CR})).node_groups[0]
    assert scaling_config(g) == {"min_size": 0, "desired_size": 4, "max_size": 4}


def test_a_capacity_block_group_still_refuses_a_range():
    with pytest.raises(SpecError) as e:
        parse_spec(eks_spec(count=4, max_count=8, capacity={"type": "capacity-block", "reservation_id": CR}))
    (line,) = [p for p in e.value.problems if p.startswith("node_groups[0].max_count: ")]
    assert "sized to its block" in line and "ec2-capacity-blocks.html" in line


def test_the_elastic_example_group_is_synthesized_with_its_range_and_node_template(p5):
    h100 = node_groups(p5)["h100"]
    assert h100["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 4, "MaxSize": 8}
    template_tags = {k: v for k, v in h100["Tags"].items() if k.startswith("k8s.io/cluster-autoscaler/")}
    assert template_tags == {
        "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "8",
        "k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa": "32",
    }
    system = node_groups(p5)["system"]
    assert system["ScalingConfig"]["MinSize"] == system["ScalingConfig"]["MaxSize"]
    assert not [k for k in system.get("Tags", {}) if k.startswith("k8s.io/cluster-autoscaler/")]


def test_node_template_tags_follow_the_groups_devices():
    spec = parse_spec(eks_spec(count=1, max_count=2))
    gpu = spec.node_groups[0]
    assert set(autoscaler.node_template_tags(gpu, efa_device="dra")) == {
        "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"}, "DRA devices are no extended resource"
    cpu = parse_spec(eks_spec(instance_type="c5.18xlarge", role="cpu", efa=False, count=1, max_count=2)).node_groups[0]
    assert autoscaler.node_template_tags(cpu, efa_device="plugin") == {}


def test_cluster_autoscaler_runs_on_the_system_nodes_and_discovers_this_clusters_groups(p5):
    (chart,) = [r["Properties"] for r in resources_of(p5, "Custom::AWSCDK-EKS-HelmChart").values()
                if r["Properties"]["Chart"] == "cluster-autoscaler"]
    pin = CHARTS["cluster-autoscaler"]
    assert (chart["Repository"], chart["Version"], chart["Namespace"]) == (pin.repository, pin.version, "kube-system")
    values = json.loads(chart["Values"])
    assert values["image"] == {"repository": "registry.k8s.io/autoscaling/cluster-autoscaler", "tag": "v1.35.2"}
    assert values["autoDiscovery"] == {"clusterName": "eks-p5", "tags": [
        "k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/eks-p5"]}
    assert values["nodeSelector"] == {"fmcluster.io/node-group": "system"}
    assert values["rbac"]["serviceAccount"]["name"] == "cluster-autoscaler"
    args = values["extraArgs"]
    assert args["balance-similar-node-groups"] is False, "each group is its own placement group"
    assert args["expander"] == "least-waste"
    assert args["skip-nodes-with-local-storage"] is True
    assert args["startup-taint"] == "fmcluster.io/node-validation"
    assert float(args["scale-down-gpu-utilization-threshold"]) < 1 / 8, "one GPU pod keeps an 8-GPU node"
    (identity,) = [r["Properties"] for r in resources_of(p5, "AWS::EKS::PodIdentityAssociation").values()
                   if r["Properties"]["ServiceAccount"] == "cluster-autoscaler"]
    assert identity["Namespace"] == "kube-system"


def test_a_node_that_failed_validation_is_not_deleted_and_relaunched_by_the_autoscaler(p5):
    """The gate's failed taint has the startup taint's key, and the autoscaler "treats nodes tainted with startup
    taints as unready" and by default scales unready nodes down once unneeded: it would delete the failed node and
    start another for the pending pods, without end when the image fails the same way (eks-p5's policy is taint)."""
    (chart,) = [r["Properties"] for r in resources_of(p5, "Custom::AWSCDK-EKS-HelmChart").values()
                if r["Properties"]["Chart"] == "cluster-autoscaler"]
    args = json.loads(chart["Values"])["extraArgs"]
    assert args["startup-taint"] == "fmcluster.io/node-validation" and args["scale-down-unready-enabled"] is False


def test_every_kubernetes_version_has_its_own_autoscaler_minor():
    assert set(CLUSTER_AUTOSCALER_TAGS) == set(KUBERNETES_VERSIONS)
    for version, tag in CLUSTER_AUTOSCALER_TAGS.items():
        assert tag.startswith(f"v{version}."), (version, tag)
    with pytest.raises(ValueError, match="kubernetes_version"):
        autoscaler.chart_values(cluster_name="c", region="us-east-1", kubernetes_version="1.29", system_selector={})


def test_the_autoscaler_role_scales_only_this_clusters_tagged_groups(p5):
    found = {s["Sid"]: s for s in statements(p5, "AutoscalerRole")}
    assert set(found) == {"ScaleThisClustersGroups", "DescribeThisClustersNodegroups", "DescribeScalingState"}
    for s in found.values():
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        assert all("*" not in a for a in actions), actions
    scale = found["ScaleThisClustersGroups"]
    assert sorted(scale["Action"]) == ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    assert scale["Condition"] == {"Null": {"aws:ResourceTag/k8s.io/cluster-autoscaler/enabled": "false",
                                           "aws:ResourceTag/k8s.io/cluster-autoscaler/eks-p5": "false"}}
    assert "autoScalingGroupName/*" in json.dumps(scale["Resource"]), "Auto Scaling groups only"
    assert ":nodegroup/eks-p5/*/*" in json.dumps(found["DescribeThisClustersNodegroups"]["Resource"])
    describe = found["DescribeScalingState"]
    assert describe["Resource"] == "*"
    assert all(a.split(":")[1].startswith("Describe") for a in describe["Action"]), "read-only calls only on *"


def test_a_cluster_without_elastic_groups_gets_no_autoscaler(synth_example):
    template = synth_example("eks-p6-b200-capacity-block")["eks-b200-cluster"]
    charts = {r["Properties"]["Chart"] for r in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()}
    assert "cluster-autoscaler" not in charts
    assert not [lid for lid in resources_of(template, "AWS::IAM::Role") if "AutoscalerRole" in lid]


def test_kueue_quota_is_the_ceiling_so_jobs_beyond_count_leave_pods_pending():
    from fmcluster.platforms.kubernetes import kueue

    spec = load_spec("examples/eks-p5.yaml")
    (h100,) = spec.node_groups
    quota = {q["name"]: q["nominalQuota"] for q in kueue.quotas(h100, "plugin")}
    assert quota["nvidia.com/gpu"] == 8 * 8 and quota["vpc.amazonaws.com/efa"] == 8 * 32

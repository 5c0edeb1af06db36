"""orchestrator eks: preflight (cluster quota, version offered, add-on versions, AMI parameters, second AZ) and status
(cluster, node groups, add-ons), against botocore Stubber answers shaped as the EKS API returns them."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from helpers import ROOT
from helpers.aws import group, make_ctx, make_spec, stubbed

from fmcluster.aws.preflight import checks_for
from fmcluster.aws.status import describers
from fmcluster.orchestrators.eks import preflight
from fmcluster.platforms.kubernetes import preflight as kubernetes_preflight
from fmcluster.platforms.kubernetes.versions import ADDONS
from fmcluster.registry import kind_named, kind_of

pytestmark = pytest.mark.usefixtures("moto")
# 1.35 named (the default is 1.34): the add-on pins these tests check exist for 1.35
EKS = {"type": "eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/admin"], "kubernetes_version": "1.35"}}


def eks_spec(**kw: Any) -> Any:
    kw.setdefault("orchestrator", EKS)
    return make_spec(**kw)


def addon_versions(name: str, versions: List[str], default: str) -> Dict[str, Any]:
    return {"addons": [{"addonName": name, "addonVersions": [
        {"addonVersion": v, "compatibilities": [{"clusterVersion": "1.35", "defaultVersion": v == default}]}
        for v in versions]}]}


def test_preflight_plans_the_eks_checks() -> None:
    ids = [c.id for c in checks_for(eks_spec(), kind_of(eks_spec()).preflight_checks(eks_spec()))]
    assert {"quota:eks-clusters", "eks:version:1.35", "eks:addons", "eks:control-plane-az"} <= set(ids)
    assert {"ami:1.35-x86_64-nvidia", "ami:1.35-x86_64-standard"} <= set(ids)
    assert "quota:ec2-p-vcpus" in ids and "offering:m6i.2xlarge" in ids
    assert len(ids) == len(set(ids)), "one check per id"


def test_the_system_nodes_ami_parameter_follows_their_architecture() -> None:
    """An arm64 system type (m7g) boots the ARM AL2023 AMI: preflight checks that parameter, not the x86 one."""
    arm = dict(EKS, eks={**EKS["eks"], "system_nodes": {"instance_type": "m7g.2xlarge"}})
    names = {c.title for c in preflight.checks(eks_spec(orchestrator=arm))}
    assert "EKS AMI /aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/standard/recommended/image_id" in names
    assert not any("x86_64/standard" in n for n in names), "no x86 CPU group left"


def test_ami_parameters_follow_version_and_architecture() -> None:
    assert preflight.ami_parameter("1.35", "x86_64", True) == \
        "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
    names = {c.title for c in preflight.checks(eks_spec(node_groups=[group(instance_type="p6e-gb200.36xlarge")]))}
    assert "EKS AMI /aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/nvidia/recommended/image_id" in names


def test_version_offered_and_its_support() -> None:
    ctx = make_ctx(eks_spec())
    eks = stubbed(ctx, "eks")
    eks.add_response("describe_cluster_versions", {"clusterVersions": [
        {"clusterVersion": "1.35", "versionStatus": "STANDARD_SUPPORT", "status": "STANDARD_SUPPORT"}]},
        {"clusterVersions": ["1.35"]})
    assert preflight.check_version(ctx).status == "pass"
    eks.add_response("describe_cluster_versions", {"clusterVersions": []}, {"clusterVersions": ["1.35"]})
    out = preflight.check_version(ctx)
    assert out.status == "fail" and "does not offer Kubernetes 1.35" in out.observed


def test_pinned_addon_versions_must_be_offered() -> None:
    ctx = make_ctx(eks_spec())
    eks = stubbed(ctx, "eks")
    installed = kubernetes_preflight.installed_addons(ctx.spec)
    assert set(ADDONS) < set(installed) and "aws-fsx-csi-driver" in installed, "a store's driver, from its store"
    for name, pin in installed.items():
        pinned = pin.version_for("1.35")
        offered = [pinned] if pinned else ["v1.2.3-eksbuild.1"]
        eks.add_response("describe_addon_versions", addon_versions(name, offered, offered[0]),
                         {"addonName": name, "kubernetesVersion": "1.35"})
    out = preflight.check_addons(ctx)
    assert out.status == "pass" and "vpc-cni v1.2.3-eksbuild.1 (default)" in out.observed
    eks = stubbed(ctx, "eks")
    for name in installed:
        eks.add_response("describe_addon_versions", addon_versions(name, ["v9.9.9-eksbuild.1"], "v9.9.9-eksbuild.1"),
                         {"addonName": name, "kubernetesVersion": "1.35"})
    out = preflight.check_addons(ctx)
    assert out.status == "fail" and "coredns v1.13.2-eksbuild.4" in out.observed


def test_ami_parameter_present_or_not() -> None:
    ctx = make_ctx(eks_spec())
    ssm = stubbed(ctx, "ssm")
    name = preflight.ami_parameter("1.35", "x86_64", True)
    ssm.add_response("get_parameter", {"Parameter": {"Name": name, "Value": "ami-0123456789abcdef0"}}, {"Name": name})
    assert preflight.check_ami_parameter(ctx, name).observed == "ami-0123456789abcdef0"
    ssm.add_client_error("get_parameter", "ParameterNotFound", "not found", expected_params={"Name": name})
    assert preflight.check_ami_parameter(ctx, name).status == "fail"


def test_cluster_quota_counts_other_clusters() -> None:
    ctx = make_ctx(eks_spec())
    eks = stubbed(ctx, "eks")
    eks.add_response("list_clusters", {"clusters": ["a", "b", "fm-dev"]}, {})
    sq = stubbed(ctx, "service-quotas")
    quota = {"ServiceCode": "eks", "QuotaCode": "L-1194D53C", "QuotaName": "Clusters", "Value": 2.0}
    sq.add_response("list_service_quotas", {"Quotas": [quota]}, {"ServiceCode": "eks"})
    sq.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "eks"})
    out = preflight.check_cluster_quota(ctx)
    assert out.status == "warn" and "2 in use" in out.observed


def test_node_group_quotas() -> None:
    # 500 nodes with their pod addresses need a /18 node subnet
    ctx = make_ctx(eks_spec(node_groups=[group(count=500)], network={"new_vpc": {"node_subnet_prefix": 18}}))
    sq = stubbed(ctx, "service-quotas")
    quotas = [{"ServiceCode": "eks", "QuotaCode": "L-6D54EA21", "QuotaName": "Managed node groups per cluster",
               "Value": 30.0},
              {"ServiceCode": "eks", "QuotaCode": "L-BD136A63", "QuotaName": "Nodes per managed node group",
               "Value": 450.0}]
    sq.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "eks"})
    sq.add_response("list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "eks"})
    out = preflight.check_node_group_quotas(ctx)
    assert out.status == "fail" and "'Nodes per managed node group' 450, spec needs 500" in out.observed
    assert "'Managed node groups per cluster' 30, spec needs 2" in out.observed


def test_second_az_must_exist() -> None:
    ctx = make_ctx(eks_spec())
    assert preflight.check_second_az(ctx).status == "pass"  # moto knows us-east-1b
    ctx = make_ctx(eks_spec(network={"new_vpc": {"second_availability_zone": "us-east-1z"}}))
    out = preflight.check_second_az(ctx)
    assert out.status == "fail" and "network.new_vpc.second_availability_zone" in out.remedy


def test_status_shows_cluster_node_groups_and_addons() -> None:
    ctx = make_ctx(eks_spec())
    eks = stubbed(ctx, "eks")
    eks.add_response("describe_cluster", {"cluster": {
        "name": "fm-dev", "status": "ACTIVE", "version": "1.35",
        "resourcesVpcConfig": {"endpointPublicAccess": False, "endpointPrivateAccess": True}}}, {"name": "fm-dev"})
    eks.add_response("list_nodegroups", {"nodegroups": ["gpu", "system"]}, {"clusterName": "fm-dev"})
    eks.add_response("describe_nodegroup", {"nodegroup": {
        "nodegroupName": "gpu", "status": "DEGRADED", "capacityType": "ON_DEMAND", "instanceTypes": ["p5.48xlarge"],
        "scalingConfig": {"desiredSize": 2}, "health": {"issues": [
            {"code": "InsufficientFreeAddresses", "message": "subnet full"}]}}},
        {"clusterName": "fm-dev", "nodegroupName": "gpu"})
    eks.add_response("describe_nodegroup", {"nodegroup": {"nodegroupName": "system", "status": "ACTIVE",
                                                          "scalingConfig": {"desiredSize": 2}}},
                     {"clusterName": "fm-dev", "nodegroupName": "system"})
    eks.add_response("list_addons", {"addons": ["vpc-cni"]}, {"clusterName": "fm-dev"})
    eks.add_response("describe_addon", {"addon": {"addonName": "vpc-cni", "status": "ACTIVE",
                                                  "addonVersion": "v1.22.2-eksbuild.1"}},
                     {"clusterName": "fm-dev", "addonName": "vpc-cni"})
    service, describe = describers(kind_named("eks").status_describers())["AWS::EKS::Cluster"]
    item = describe(ctx, "fm-dev")
    assert service == "eks" and item.health == "ok" and "Kubernetes 1.35 (private endpoint)" in item.state
    gpu, system, cni = item.children
    assert gpu.health == "bad" and "InsufficientFreeAddresses: subnet full" in gpu.detail
    assert "2 x p5.48xlarge ON_DEMAND" in gpu.state and system.health == "ok"
    assert cni.type == "add-on" and "v1.22.2-eksbuild.1" in cni.state


def test_admins_must_exist_in_this_account() -> None:
    """The spec checks an admin ARN's shape only; preflight asks IAM (moto) that the role or user exists."""
    import boto3

    from fmcluster.platforms.kubernetes.preflight import check_admins

    ctx = make_ctx(eks_spec())
    assert check_admins(ctx).status == "fail" and "missing: arn:aws:iam::123456789012:role/admin" in \
        check_admins(ctx).observed
    boto3.client("iam", region_name=ctx.region).create_role(RoleName="admin", AssumeRolePolicyDocument="{}")
    assert check_admins(ctx).status == "pass"
    other = dict(EKS, eks={**EKS["eks"], "admins": ["arn:aws:iam::210987654321:role/ops"]})
    assert check_admins(make_ctx(eks_spec(orchestrator=other))).status == "warn"
    ids = [c.id for c in preflight.checks(eks_spec())]
    assert "eks:admins" in ids


def test_a_configured_stores_driver_is_checked_at_its_stores_pins() -> None:
    """Mountpoint for Amazon S3's driver is installed where the spec mounts the store, so preflight asks for it."""
    from fmcluster.registry import load_spec

    spec = load_spec(ROOT / "examples" / "eks-p6-b200-capacity-block.yaml")
    assert spec.storage.mountpoint_s3 is not None
    assert "aws-mountpoint-s3-csi-driver" in kubernetes_preflight.installed_addons(spec)
    assert "aws-mountpoint-s3-csi-driver" not in kubernetes_preflight.installed_addons(make_ctx(eks_spec()).spec)

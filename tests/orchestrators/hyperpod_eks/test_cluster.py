"""`orchestrator: hyperpod-eks` as synthesized: the HyperPod cluster on the EKS control plane, its instance groups, and
the order CloudFormation creates things in (chart and add-ons before the HyperPod cluster; task governance, the
training operator after it; the teams' claims from inside the cluster, never waited for)."""

from __future__ import annotations

import json

import pytest
from helpers import policy_statements, resources_of
from helpers.storage import no_mounts

from fmcluster.orchestrators.hyperpod_eks import nodes
from fmcluster.orchestrators.hyperpod_eks.versions import HYPERPOD_CHART, TASK_GOVERNANCE, TRAINING_OPERATOR

P5, P5EN = "hpeks-p5-cluster", "hpeks-p5en-cluster"


@pytest.fixture(scope="module")
def p5(synth_example):
    return synth_example("hyperpod-eks-p5")[P5]


@pytest.fixture(scope="module")
def p5en(synth_example):
    return synth_example("hyperpod-eks-p5en-training-plan")[P5EN]


def one(template, type_):
    ((lid, res),) = resources_of(template, type_).items()
    return lid, res


def by_name(template, type_, key):
    return {r["Properties"][key]: (lid, r) for lid, r in resources_of(template, type_).items()}


def groups(template):
    _, cluster = one(template, "AWS::SageMaker::Cluster")
    return {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}


def test_hyperpod_cluster_on_the_eks_control_plane(p5):
    eks_id, eks = one(p5, "AWS::EKS::Cluster")
    _, cluster = one(p5, "AWS::SageMaker::Cluster")
    props = cluster["Properties"]
    assert props["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [eks_id, "Arn"]}}}
    assert props["NodeRecovery"] == "Automatic" and props["NodeProvisioningMode"] == "Continuous"
    assert "ImportValue" in json.dumps(props["VpcConfig"]["Subnets"]) and len(props["VpcConfig"]["Subnets"]) == 1
    # HyperPod's requirements of the EKS cluster: API authentication, a private endpoint, a version it supports
    assert eks["Properties"]["AccessConfig"]["AuthenticationMode"] == "API"
    assert eks["Properties"]["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert eks["Properties"]["Version"] == "1.33"  # the example's: the training operator's page lists up to 1.33
    assert {"Key": "SageMaker", "Value": "true"} in props["Tags"], "the training operator's policy acts on such clusters"


def test_one_instance_group_per_node_group_and_a_system_group(p5):
    g = groups(p5)
    assert list(g) == ["h100", "prep", "system"]  # prep is elastic: test_hyperpod_eks_elastic.py
    h100, system = g["h100"], g["system"]
    assert h100["InstanceType"] == "ml.p5.48xlarge" and h100["InstanceCount"] == 4
    assert h100["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert h100["NetworkInterface"] == {"InterfaceType": "efa-only"}
    assert h100["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert h100["KubernetesConfig"]["Labels"]["fmcluster.io/node-group"] == "h100"
    assert h100["KubernetesConfig"]["Labels"]["nvidia.com/gpu.present"] == "true"
    assert "Taints" not in h100["KubernetesConfig"], "HyperPod refuses custom taints with deep health checks"
    assert h100["LifeCycleConfig"]["OnCreate"] == "on_create.h100.sh" and "OnInitComplete" not in h100["LifeCycleConfig"]
    assert "s3://sagemaker-hpeks-p5-" in json.dumps(h100["LifeCycleConfig"]["SourceS3Uri"])
    assert "SlurmConfig" not in h100 and "SlurmConfig" not in system
    assert system["InstanceType"] == "ml.m5.4xlarge" and system["InstanceCount"] == 2
    assert "OnStartDeepHealthChecks" not in system and system["LifeCycleConfig"]["OnCreate"] == "on_create.system.sh"


def test_training_plan_groups_and_no_gate_under_fail(p5en):
    g = groups(p5en)["h200"]
    assert g["TrainingPlanArn"] == "arn:aws:sagemaker:us-east-1:123456789012:training-plan/h200-april"
    manifests = [json.dumps(r["Properties"]) for r in resources_of(p5en, "Custom::AWSCDK-EKS-KubernetesResource").values()]
    assert not any("fmcluster-node-gate" in m for m in manifests), "under fail a failed node never joins: no gate"
    addons = by_name(p5en, "AWS::EKS::Addon", "AddonName")
    assert TRAINING_OPERATOR not in addons and TASK_GOVERNANCE in addons


def test_without_deep_health_checks_nodes_register_with_the_gates_pending_taint(tmp_path):
    import yaml

    from fmcluster.orchestrators.hyperpod_eks.nodes import instance_groups
    from fmcluster.registry import load_spec

    data = yaml.safe_load(open("examples/hyperpod-eks-p5.yaml"))
    data["orchestrator"]["hyperpod"]["deep_health_checks"] = False
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    h100 = instance_groups(load_spec(path))[0]
    assert h100.kubernetes_taints == ({"key": "fmcluster.io/node-validation", "value": "pending",
                                       "effect": "NoSchedule"},) and not h100.deep_health_checks


def test_dependencies_come_before_the_hyperpod_cluster(p5):
    """HyperPod's prerequisites: its dependency chart and the standard add-ons (VPC CNI, ...) exist before the
    HyperPod cluster; the training operator (it needs a HyperPod cluster) and task governance after it."""
    cluster_id, cluster = one(p5, "AWS::SageMaker::Cluster")
    chart_id, _ = one(p5, "Custom::GitHelmChart")
    addons = by_name(p5, "AWS::EKS::Addon", "AddonName")
    before = set(cluster["DependsOn"])
    assert chart_id in before
    for name in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "aws-fsx-csi-driver"):
        assert addons[name][0] in before, name
    operator_id, operator = addons[TRAINING_OPERATOR]
    assert operator_id not in before and cluster_id in operator["DependsOn"]
    for lid, res in [*resources_of(p5, "AWS::SageMaker::ComputeQuota").items(),
                     *resources_of(p5, "AWS::SageMaker::ClusterSchedulerConfig").items()]:
        assert res["Properties"]["ClusterArn"] == {"Fn::GetAtt": [cluster_id, "ClusterArn"]}, lid
    assert "eks-node-monitoring-agent" not in addons, "HyperPod's health monitoring agent watches its nodes"


def test_task_governance_comes_after_the_cluster_the_chart_and_our_workloads(p5):
    """Its Kueue's Pod and Deployment webhooks fail closed outside kube-system and kueue-system (kueue
    config/components/webhook): created before any node can run them, they would refuse the chart's and our
    Deployments. Order: EKS, chart, HyperPod cluster, our manifests, task governance, scheduler config and quotas."""
    cluster_id, cluster = one(p5, "AWS::SageMaker::Cluster")
    chart_id, _ = one(p5, "Custom::GitHelmChart")
    addons = by_name(p5, "AWS::EKS::Addon", "AddonName")
    tg_id, tg = addons[TASK_GOVERNANCE]
    assert tg_id not in cluster["DependsOn"]
    after = set(tg["DependsOn"])
    assert {cluster_id, chart_id} <= after
    manifests = [lid for lid in resources_of(p5, "Custom::AWSCDK-EKS-KubernetesResource")
                 if "NodeGate" in lid or "Exporters" in lid]
    assert manifests and set(manifests) <= after, "the gate and the exporters are in before the webhooks"
    (config_id, config), = resources_of(p5, "AWS::SageMaker::ClusterSchedulerConfig").items()
    assert tg_id in config["DependsOn"]


def test_the_training_operator_is_created_before_task_governance_never_after(p5):
    """The operator's Deployment goes into aws-hyperpod, which Kueue's fail-closed Deployment and Pod webhooks cover;
    under Continuous provisioning the HyperPod cluster is complete before a node can serve them. Created before the
    task-governance add-on, it never meets a webhook without an endpoint."""
    addons = by_name(p5, "AWS::EKS::Addon", "AddonName")
    operator_id, operator = addons[TRAINING_OPERATOR]
    tg_id, tg = addons[TASK_GOVERNANCE]
    assert operator_id in tg["DependsOn"], "task governance waits for the training operator"
    assert tg_id not in operator["DependsOn"], "the operator must not wait for Kueue's webhooks"


def test_the_chart_is_fetched_at_deploy_time_at_the_pinned_commit(p5):
    chart_id, chart = one(p5, "Custom::GitHelmChart")
    props = chart["Properties"]
    assert props["ArchiveUrl"] == f"https://github.com/aws/sagemaker-hyperpod-cli/archive/{HYPERPOD_CHART.commit}.tar.gz"
    assert props["ChartPath"] == "helm_chart/HyperPodHelmChart" and props["TreeId"] == HYPERPOD_CHART.tree
    assert (props["Release"], props["Namespace"]) == ("hyperpod-dependencies", "kube-system")
    values = json.loads(props["Values"])
    assert values["global"]["region"] == "us-east-1" and values["cert-manager"]["enabled"] is True
    assert values["cert-manager"]["startupapicheck"]["enabled"] is False, "a hook Job would wait for nodes"
    assert values["neuron-device-plugin"]["devicePlugin"]["enabled"] is False
    assert values["health-monitoring-agent"]["enabled"] and values["job-auto-restart"]["enabled"]
    # cert-manager's objects go to its own namespace, which no template of the chart creates: the installer does
    assert values["cert-manager"]["namespace"] == "cert-manager"
    assert values["cert-manager"]["global"]["leaderElection"]["namespace"] == "cert-manager"
    assert props["Namespaces"] == ["cert-manager"]
    fn_id = props["ServiceToken"]["Fn::GetAtt"][0]
    fn = p5["Resources"][fn_id]["Properties"]
    assert fn["Timeout"] == 900 and fn["VpcConfig"]["SubnetIds"] and fn["Layers"], "in the VPC, with helm"
    access = [r["Properties"] for r in resources_of(p5, "AWS::EKS::AccessEntry").values()
              if fn["Role"]["Fn::GetAtt"][0] in json.dumps(r["Properties"]["PrincipalArn"])]
    assert len(access) == 1 and "AmazonEKSClusterAdminPolicy" in json.dumps(access[0]["AccessPolicies"])
    assert set(chart["DependsOn"]) >= {r for r in resources_of(p5, "AWS::EKS::AccessEntry")
                                       if r.startswith("HyperPodEksDependencies")}


def test_without_the_training_operator_the_installer_creates_no_namespace(p5en):
    _, chart = one(p5en, "Custom::GitHelmChart")
    assert json.loads(chart["Properties"]["Values"])["cert-manager"]["enabled"] is False
    assert "Namespaces" not in chart["Properties"]


def test_task_governance_objects(p5):
    _, policy = one(p5, "AWS::SageMaker::ClusterSchedulerConfig")
    assert policy["Properties"]["Name"] == "hpeks-p5-policy"
    assert policy["Properties"]["SchedulerConfig"] == {
        "FairShare": "Enabled", "IdleResourceSharing": "Enabled",
        "PriorityClasses": [{"Name": "inference", "Weight": 90}, {"Name": "training", "Weight": 50},
                            {"Name": "experimentation", "Weight": 10}]}
    quotas = by_name(p5, "AWS::SageMaker::ComputeQuota", "Name")
    assert set(quotas) == {"hpeks-p5-research", "hpeks-p5-production"}
    _, research = quotas["hpeks-p5-research"]
    props = research["Properties"]
    assert props["ComputeQuotaTarget"] == {"TeamName": "research"}
    assert props["ComputeQuotaConfig"] == {
        "ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge", "Accelerators": 16},
                                  # room for two MPI launchers on the system nodes (docs/hyperpod-eks.md, "The first job")
                                  {"InstanceType": "ml.m5.4xlarge", "VCpu": 4, "MemoryInGiB": 4}],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 100}, "PreemptTeamTasks": "LowerPriority"}
    assert {"Key": "fmcluster:cluster", "Value": "hpeks-p5"} in props["Tags"], "a plain CfnResource: tagged by hand"
    _, policy_res = one(p5, "AWS::SageMaker::ClusterSchedulerConfig")
    assert {t["Key"]: t["Value"] for t in props["Tags"]} == {t["Key"]: t["Value"] for t in policy_res["Properties"]["Tags"]}
    _, production = quotas["hpeks-p5-production"]
    assert production["Properties"]["ComputeQuotaTarget"] == {"TeamName": "production", "FairShareWeight": 80}
    assert production["Properties"]["ComputeQuotaConfig"]["ResourceSharingConfig"] == {"Strategy": "Lend"}
    policy_id = next(iter(resources_of(p5, "AWS::SageMaker::ClusterSchedulerConfig")))
    assert all(policy_id in q["DependsOn"] for _, q in quotas.values())


def manifests(template):
    """logical id -> (resource, the objects its manifest applies; values from other stacks read TOKEN)."""
    def objects(manifest):
        return json.loads(manifest if isinstance(manifest, str) else "".join(
            p if isinstance(p, str) else "TOKEN" for p in manifest["Fn::Join"][1]))

    return {lid: (r, objects(r["Properties"]["Manifest"]))
            for lid, r in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").items()}


def test_the_stack_never_waits_for_a_teams_namespace(p5):
    """Task governance creates hyperpod-ns-<team> for the team's quota at a time AWS does not document (later still
    under Continuous provisioning): nothing in the stack waits for it, as any wait would end with the kubectl
    provider's 15 minutes and roll the stack back."""
    waiters = resources_of(p5, "Custom::AWSCDK-EKS-KubernetesObjectValue")
    assert not [r for r in waiters.values() if r["Properties"]["ObjectType"] == "namespace"]
    quotas = set(resources_of(p5, "AWS::SageMaker::ComputeQuota"))
    for lid, (res, objects) in manifests(p5).items():
        if any(o["metadata"].get("namespace", "").startswith("hyperpod-ns-") for o in objects):
            raise AssertionError(f"{lid} applies into a team's namespace, which may not exist yet")
        assert not quotas & set(res.get("DependsOn", [])), f"{lid} waits for a team's quota"


def test_each_teams_volume_is_applied_at_once_by_the_manifest_that_held_it(p5):
    """The volume stays in the manifest (same logical id) that held the volume and the claim, so an existing stack
    updates that resource in place; pruning is off, so the update applies the volume alone and leaves the claim in
    the team's namespace as it is (kubectl apply --prune would delete it)."""
    found = manifests(p5)
    fsx_addon = next(lid for lid, r in resources_of(p5, "AWS::EKS::Addon").items()
                     if r["Properties"]["AddonName"] == "aws-fsx-csi-driver")
    for team, lid in (("research", "HyperPodEksObjectsResearchSharedFileSystemB2F8D06B"),
                      ("production", "HyperPodEksObjectsProductionSharedFileSystem3BF8088D")):
        res, objects = found[lid]
        assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [("PersistentVolume", f"hpeks-p5-{team}-fsx")]
        assert "PruneLabel" not in res["Properties"]
        assert fsx_addon in res["DependsOn"]


def test_a_deployment_creates_each_teams_claim_from_inside_the_cluster(p5):
    """The claims, exactly as the volumes' manifest held them before, go to a Deployment in fmcluster's namespace
    that waits for each team's namespace and creates the claim there; it goes in before the task-governance add-on
    (whose Kueue webhooks would refuse a Deployment while no node runs them)."""
    found = manifests(p5)
    (lid, (res, objects)), = [(k, v) for k, v in found.items() if any(
        o["kind"] == "Deployment" and o["metadata"]["name"] == "fmcluster-team-objects" for o in v[1])]
    assert lid.startswith("HyperPodEksObjectsTeamObjects")
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    claims = json.loads(config["data"]["objects.json"])
    assert [(c["metadata"]["namespace"], c["spec"]["volumeName"]) for c in claims] == [
        ("hyperpod-ns-research", "hpeks-p5-research-fsx"), ("hyperpod-ns-production", "hpeks-p5-production-fsx")]
    (addon_id, addon), = [(k, r) for k, r in resources_of(p5, "AWS::EKS::Addon").items()
                          if r["Properties"]["AddonName"] == TASK_GOVERNANCE]
    assert lid in addon["DependsOn"]
    gate = next(k for k, (_, objs) in found.items() if any(o["kind"] == "DaemonSet" and
                                                           o["metadata"]["name"] == "fmcluster-node-gate" for o in objs))
    assert gate in res["DependsOn"], "the node gate's manifest creates fmcluster's namespace"


def test_the_instance_role_holds_what_an_eks_node_needs_and_no_access_entry(p5):
    roles = {lid: r for lid, r in resources_of(p5, "AWS::IAM::Role").items() if lid.startswith("HyperPodEksInstanceRole")}
    ((role_id, role),) = roles.items()
    assert "sagemaker.amazonaws.com" in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
    managed = json.dumps(role["Properties"]["ManagedPolicyArns"])
    assert "AmazonSageMakerClusterInstanceRolePolicy" in managed and "AmazonEC2ContainerRegistryPullOnly" in managed
    statements = [s for lid, p in resources_of(p5, "AWS::IAM::Policy").items() if lid.startswith("HyperPodEksInstanceRole")
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    pod_identity = [s for s in statements if s.get("Action") == "eks-auth:AssumeRoleForPodIdentity"]
    assert len(pod_identity) == 1 and "Cluster" in json.dumps(pod_identity[0]["Resource"])
    entries = json.dumps([r["Properties"]["PrincipalArn"] for r in resources_of(p5, "AWS::EKS::AccessEntry").values()])
    assert role_id not in entries, "HyperPod creates its execution role's access entry itself"


def test_the_instance_role_lets_the_vpc_cni_manage_ips_on_the_nodes_eni(p5):
    """AWS's HyperPod EKS execution role grants the VPC CNI's ENI actions; here each is limited to the resource types
    the Service Authorization Reference lists for it (no action or resource wildcard beyond ENI and instance ids)."""
    statements = {s.get("Sid"): s for lid, p in resources_of(p5, "AWS::IAM::Policy").items()
                  if lid.startswith("HyperPodEksInstanceRole") for s in p["Properties"]["PolicyDocument"]["Statement"]}
    ips, modify = statements["VpcCniPrivateIps"], statements["VpcCniModifyEni"]
    assert ips["Action"] == ["ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"]
    assert modify["Action"] == "ec2:ModifyNetworkInterfaceAttribute"
    assert json.dumps(ips["Resource"]).count("network-interface/*") == 1 and isinstance(ips["Resource"], dict)
    resources = json.dumps(modify["Resource"])
    assert "network-interface/*" in resources and ":security-group/" in resources and ":subnet/" in resources
    assert ":instance/*" in resources and '"*"' not in resources


def test_lifecycle_entries_parameters_and_profiles(synth_example):
    from fmcluster.platforms.hyperpod import lifecycle_entry
    from fmcluster.registry import load_spec
    from fmcluster.runtime import contract, stores
    from fmcluster.runtime.node_setup import identity, parameters

    spec = load_spec("examples/hyperpod-eks-p5en-training-plan.yaml")
    params = nodes.lifecycle_parameters(spec, "us-east-1", no_mounts(), observability=False)
    assert tuple(params) == contract.with_store_entries(contract.EKS_LIFECYCLE_PARAMETERS_KEYS, stores.lifecycle_keys())
    assert all(tuple(w) == contract.EKS_WORKER_GROUP_KEYS for w in params["worker_groups"])
    parameters.validate_eks_params(params)
    assert identity.eks_node(params, "h200")["node_policy"] == "fail"
    entry = lifecycle_entry.entry_script(bucket="b", region="us-east-1", group="h200", hook="OnCreate")
    assert "fm_group=h200 " in entry and entry.endswith('platforms/hyperpod/node/on_create_eks.sh" --group "$fm_group" "$@"\n')
    profile = nodes.node_profile(spec, spec.node_groups[0])
    assert profile.orchestrator == "kubernetes" and profile.policy == "fail" and profile.instance_store is None
    assert profile.mounts == [{"path": "/fsx", "fstype": "lustre", "required": True, "efa": True}]
    assert "acc.cuda" in profile.disabled_checks and "orch.slurm_node" in profile.disabled_checks


def test_nothing_but_the_kind_grants_wildcards(p5):
    for st in policy_statements(p5):
        actions = st.get("Action")
        assert "*" not in (actions if isinstance(actions, list) else [actions])

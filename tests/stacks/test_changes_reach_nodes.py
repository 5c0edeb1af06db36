"""A change that must reach the nodes (a new AMI, an instance setting in the launch template) goes through the
orchestrator's own rolling mechanism, set so that it does not kill running jobs; docs/changes.md, "When a change
must reach the nodes", has the sources. One test per orchestrator kind, on the examples' templates."""

from __future__ import annotations

from helpers import resources_of
from helpers.parallelcluster import configuration


def test_none_a_launch_template_change_is_a_new_version_nothing_launches_or_replaces(synth_example):
    """Without an orchestrator nothing launches from the templates: a change is a new template version that
    instances launched later use; running instances are not touched (EC2 launch templates)."""
    cluster = synth_example("default")["fm-dev-cluster"]
    assert resources_of(cluster, "AWS::EC2::LaunchTemplate")
    launchers = [t for t in ("AWS::AutoScaling::AutoScalingGroup", "AWS::EC2::Instance", "AWS::EC2::EC2Fleet",
                             "AWS::EC2::SpotFleet") if resources_of(cluster, t)]
    assert launchers == []


def test_pcs_compute_node_groups_follow_the_latest_launch_template_version_in_place(synth_example):
    """The compute node group names the template's latest version, an update that needs no interruption
    (AWS::PCS::ComputeNodeGroup CustomLaunchTemplate.Version); AWS PCS launches new instances with it."""
    cluster = synth_example("pcs-p5")["pcs-p5-cluster"]
    groups = resources_of(cluster, "AWS::PCS::ComputeNodeGroup")
    assert groups
    for group in groups.values():
        template = group["Properties"]["CustomLaunchTemplate"]
        (lt, attribute) = template["Version"]["Fn::GetAtt"]
        assert attribute == "LatestVersionNumber" and template["TemplateId"] == {"Ref": lt}


def test_eks_node_groups_roll_one_node_at_a_time_within_pod_disruption_budgets(synth_example):
    cluster = synth_example("eks-p5")["eks-p5-cluster"]
    groups = {g["Properties"]["NodegroupName"]: g["Properties"]
              for g in resources_of(cluster, "AWS::EKS::Nodegroup").values()}
    for name, group in groups.items():
        assert group["ForceUpdateEnabled"] is False, f"{name}: a forced update evicts pods regardless of budgets"
        assert group["UpdateConfig"]["MaxUnavailable"] == 1
    # GPU groups: no surge instances (a reservation or scarce capacity cannot supply them)
    assert groups["h100"]["UpdateConfig"]["UpdateStrategy"] == "MINIMAL"
    assert "UpdateStrategy" not in groups["system"]["UpdateConfig"]


def test_eks_capacity_block_groups_ask_for_the_whole_block_and_roll_without_surge(synth_example):
    """A Capacity Block group asks for its count from creation (its Auto Scaling group launches when the block starts,
    EKS user guide, capacity-blocks-mng), so an update never sends a smaller desired size over the running block. AWS
    asks that such a group be at size 0 while it is updated; fmcluster diff says so before such an update."""
    cluster = synth_example("eks-p6-b200-capacity-block")["eks-b200-cluster"]
    (group,) = [g["Properties"] for g in resources_of(cluster, "AWS::EKS::Nodegroup").values()
                if g["Properties"]["CapacityType"] == "CAPACITY_BLOCK"]
    assert group["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 2, "MaxSize": 2}
    assert group["ForceUpdateEnabled"] is False
    assert group["UpdateConfig"] == {"MaxUnavailable": 1, "UpdateStrategy": "MINIMAL"}


def test_hyperpod_instance_groups_run_no_scheduled_software_update(synth_example):
    """UpdateClusterSoftware replaces root volumes and drains no jobs (SageMaker HyperPod developer guide): fmcluster
    schedules none (no ScheduledUpdateConfig), so an AMI update happens only when the user runs it. Lifecycle
    scripts come from a stable prefix: instances HyperPod creates later (scale-up, replacement) read what is
    published then; running ones keep theirs."""
    for example, stack in (("hyperpod-slurm-p5", "hp-p5-cluster"), ("hyperpod-eks-p5", "hpeks-p5-cluster")):
        (cluster,) = resources_of(synth_example(example)[stack], "AWS::SageMaker::Cluster").values()
        for group in cluster["Properties"]["InstanceGroups"]:
            assert "ScheduledUpdateConfig" not in group
            uri = group["LifeCycleConfig"]["SourceS3Uri"]
            text = uri if isinstance(uri, str) else "".join(p for p in uri["Fn::Join"][1] if isinstance(p, str))
            assert text.startswith("s3://sagemaker-") and text.endswith("/lifecycle/")


def test_parallelcluster_replaces_queue_nodes_only_after_their_jobs_finish(synth_example):
    """QueueUpdateStrategy DRAIN: a queue setting that needs new nodes drains them; running jobs finish first
    (ParallelCluster update policies, QUEUE_UPDATE_STRATEGY)."""
    config = configuration(synth_example("parallelcluster-p5")["pc-p5-cluster"])
    assert config["Scheduling"]["SlurmSettings"]["QueueUpdateStrategy"] == "DRAIN"

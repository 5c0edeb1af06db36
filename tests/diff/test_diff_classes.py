"""`fmcluster diff` classifies each kind of spec change as a reviewer needs it, on every orchestrator kind.

The templates are the committed synthesized examples (templates/<example>/); each change is the edit the spec change
makes to them, so one synthesis per example (done by `make templates`) serves every case here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from fmcluster.cli import main
from fmcluster.diff import compare
from fmcluster.diff.consequences import BOOT_POINTERS
from fmcluster.diff.findings import CAPACITY, CONTROL_PLANE, DATA, NODES, SAFE
from fmcluster.diff.replacement import judge

ROOT = Path(__file__).resolve().parents[2]


def templates(example: str) -> Dict[str, Dict[str, Any]]:
    return {p.name[: -len(".template.json")]: json.loads(p.read_text())
            for p in sorted((ROOT / "templates" / example).glob("*.template.json"))}


def resources(ts: Dict[str, Any], rtype: str) -> Iterator[Tuple[str, Dict[str, Any]]]:
    for stack in ts.values():
        for lid, r in stack["Resources"].items():
            if r["Type"] == rtype:
                yield lid, r


def first(ts: Dict[str, Any], rtype: str, pick: Callable[[str, Dict[str, Any]], bool] = lambda lid, r: True):
    return next(r["Properties"] for lid, r in resources(ts, rtype) if pick(lid, r))


def gpu_nodegroup(lid: str, r: Dict[str, Any]) -> bool:
    return "nvidia.com/gpu.present" in r["Properties"].get("Labels", {})


def gpu_launch_template(lid: str, r: Dict[str, Any]) -> bool:
    return r["Properties"]["LaunchTemplateData"].get("InstanceType", "p").startswith("p") and "Login" not in lid \
        and "System" not in lid


def edit(example: str, change: Callable[[Dict[str, Any]], None]):
    old = templates(example)
    new = copy.deepcopy(old)
    change(new)
    return compare(old, new)


def classes_of(report) -> List[str]:
    return report.classes()


# --- each change: the spec edit it stands for, and the classes a reviewer must see -------------------------------

def eks_count_down(t):
    first(t, "AWS::EKS::Nodegroup", gpu_nodegroup)["ScalingConfig"].update(DesiredSize=2, MinSize=2, MaxSize=2)


def eks_count_up(t):
    first(t, "AWS::EKS::Nodegroup", gpu_nodegroup)["ScalingConfig"].update(DesiredSize=10, MaxSize=16)


def eks_capacity_type(t):
    first(t, "AWS::EKS::Nodegroup", gpu_nodegroup)["CapacityType"] = "SPOT"


def eks_kubernetes_version(t):
    first(t, "AWS::EKS::Cluster")["Version"] = "1.36"


def launch_template_user_data(t):
    for lid, r in resources(t, "AWS::EC2::LaunchTemplate"):
        r["Properties"]["LaunchTemplateData"]["UserData"] = {"Fn::Base64": "#!/bin/bash\necho next runtime\n"}


def runtime_upgrade(t):
    """A new fmcluster runtime and validation level, as the boot pointers carry them: launch templates unchanged."""
    for _, r in resources(t, "Custom::CDKBucketDeployment"):
        for pointer in r.get("Metadata", {}).get(BOOT_POINTERS, {}).values():
            pointer["runtime"] = {"key": f"runtime/{'b' * 64}.zip", "sha256": "b" * 64}
            pointer["level"] = "fast"
        if BOOT_POINTERS in r.get("Metadata", {}):
            r["Properties"]["SourceObjectKeys"] = [f"{'c' * 64}.zip"]


def pcs_instance_type(t):
    first(t, "AWS::PCS::ComputeNodeGroup", lambda lid, r: "Login" not in lid)["InstanceConfigs"] = [
        {"InstanceType": "p5en.48xlarge"}]


def pcs_count_down(t):
    first(t, "AWS::PCS::ComputeNodeGroup", lambda lid, r: "Login" not in lid)["ScalingConfiguration"].update(
        MinInstanceCount=2, MaxInstanceCount=2)


def hyperpod_group(t, name):
    return next(g for g in first(t, "AWS::SageMaker::Cluster")["InstanceGroups"] if g["InstanceGroupName"] == name)


def hyperpod_count_down(t):
    hyperpod_group(t, "h100")["InstanceCount"] = 2


def hyperpod_new_group(t):
    groups = first(t, "AWS::SageMaker::Cluster")["InstanceGroups"]
    extra = copy.deepcopy(groups[0])  # the GPU group
    extra.update(InstanceGroupName=f"{groups[0]['InstanceGroupName']}b", InstanceCount=2)
    groups.append(extra)


def hyperpod_training_plan_instance_type(t):
    hyperpod_group(t, "h200").update(InstanceType="ml.p5.48xlarge")


def hyperpod_lifecycle(t):
    for g in first(t, "AWS::SageMaker::Cluster")["InstanceGroups"]:
        g["LifeCycleConfig"]["OnCreate" if "OnCreate" in g["LifeCycleConfig"] else "OnInitComplete"] = "next.sh"


def pcluster_resource(t):
    cfg = first(t, "Custom::PclusterCluster")["ClusterConfiguration"]
    return cfg["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]


def pcluster_instance_type(t):
    pcluster_resource(t)["InstanceType"] = "p5en.48xlarge"


def pcluster_queue_removed(t):
    first(t, "Custom::PclusterCluster")["ClusterConfiguration"]["Scheduling"]["SlurmQueues"].pop(0)


def fsx_throughput(t):
    first(t, "AWS::FSx::FileSystem")["LustreConfiguration"]["PerUnitStorageThroughput"] = 500


def fsx_deployment_type(t):
    first(t, "AWS::FSx::FileSystem")["LustreConfiguration"]["DeploymentType"] = "PERSISTENT_1"


def dra_path(t):
    first(t, "AWS::FSx::DataRepositoryAssociation")["DataRepositoryPath"] = {
        "Fn::Join": ["", ["s3://", {"Ref": "DataBucket"}, "/datasets-v2/"]]}


def moved(rtype: str, pick=lambda lid, r: True):
    """The resource under a new logical id, as a refactored construct tree would put it."""
    def change(t):
        stack = next(st for st in t.values() if any(r["Type"] == rtype for r in st["Resources"].values()))
        lid = next(lid for lid, r in stack["Resources"].items() if r["Type"] == rtype and pick(lid, r))
        stack["Resources"][f"{lid}Moved"] = stack["Resources"].pop(lid)
    change.__name__ = f"moved_{rtype.split('::')[-1].lower()}"
    return change


def directory_bucket_zone(t):
    first(t, "AWS::S3Express::DirectoryBucket")["LocationName"] = "use1-az5"


def alert_email(t):
    first(t, "AWS::SNS::Subscription")["Endpoint"] = "ml-oncall-2@example.com"


def node_subnet_cidr(t):
    first(t, "AWS::EC2::Subnet", lambda lid, r: "Nodes" in lid)["CidrBlock"] = "10.0.128.0/22"


def pcs_capacity_instance_type(t):
    for lid, r in resources(t, "AWS::PCS::ComputeNodeGroup"):
        if "Login" not in lid:
            r["Properties"]["InstanceConfigs"] = [{"InstanceType": "p5en.48xlarge"}]


def eks_new_group(t):
    cluster = next(st for st in t.values() if any(r["Type"] == "AWS::EKS::Nodegroup" for r in st["Resources"].values()))
    lid, group = next((lid, r) for lid, r in resources(t, "AWS::EKS::Nodegroup") if gpu_nodegroup(lid, r))
    extra = copy.deepcopy(group)
    extra["Properties"]["NodegroupName"] = "h100b"
    cluster["Resources"]["EksNodesH100bNodeGroup0123ABCD"] = extra


def pcluster_new_queue(t):
    queues = first(t, "Custom::PclusterCluster")["ClusterConfiguration"]["Scheduling"]["SlurmQueues"]
    extra = copy.deepcopy(queues[0])
    extra["Name"] = "h100b"
    queues.append(extra)


def pcluster_count_down(t):
    pcluster_resource(t).update(MinCount=1)


def pcluster_custom_action(t):
    cfg = first(t, "Custom::PclusterCluster")["ClusterConfiguration"]
    cfg["Scheduling"]["SlurmQueues"][0]["CustomActions"]["OnNodeConfigured"]["Args"].append("--next")


# --- more changes: sizes, refusals, shared storage, versions, schedulers, zones ------------------------------------

def gpu_sizes(t):
    return first(t, "AWS::EKS::Nodegroup", gpu_nodegroup)["ScalingConfig"]


def eks_max_up(t):
    gpu_sizes(t).update(MaxSize=16)


def eks_min_up(t):
    gpu_sizes(t).update(MinSize=2)


def system_count_down(t):
    first(t, "AWS::EKS::Nodegroup", lambda lid, r: "System" in lid)["ScalingConfig"].update(
        MinSize=1, DesiredSize=1, MaxSize=1)


def eks_version_jump(t):
    first(t, "AWS::EKS::Cluster")["Version"] = "1.37"


def eks_scheduler_volcano(t):
    cluster = next(st for st in t.values() if any(r["Type"] == "AWS::EKS::Cluster" for r in st["Resources"].values()))
    lid = next(lid for lid, r in resources(t, "Custom::AWSCDK-EKS-HelmChart") if r["Properties"]["Chart"] == "kueue")
    volcano = copy.deepcopy(cluster["Resources"].pop(lid))
    volcano["Properties"].update(Chart="volcano", Release="volcano", Namespace="volcano-system", Version="1.13.0")
    cluster["Resources"]["EksObjectsVolcano0123ABCD"] = volcano


def zone_move(t):
    """availability_zone changed: every subnet of the GPU zone moves (what the spec edit does to the network stack)."""
    for lid, r in resources(t, "AWS::EC2::Subnet"):
        if r["Properties"].get("AvailabilityZone", "").endswith("a"):
            r["Properties"]["AvailabilityZone"] = r["Properties"]["AvailabilityZone"][:-1] + "c"


def block_count_down(t):
    first(t, "AWS::EKS::Nodegroup", gpu_nodegroup)["ScalingConfig"].update(DesiredSize=1, MaxSize=1)


def block_created_at_zero(t):
    """The template an earlier release deployed: the block's group at desired size 0."""
    first(t, "AWS::EKS::Nodegroup", gpu_nodegroup)["ScalingConfig"]["DesiredSize"] = 0


def earlier_block_count_down(t):
    block_created_at_zero(t)
    first(t, "AWS::EKS::Nodegroup", gpu_nodegroup)["ScalingConfig"]["MaxSize"] = 1


def block_removed(t):
    cluster = next(st for st in t.values() if any(r["Type"] == "AWS::EKS::Nodegroup" for r in st["Resources"].values()))
    lid = next(lid for lid, r in resources(t, "AWS::EKS::Nodegroup") if gpu_nodegroup(lid, r))
    del cluster["Resources"][lid]


def pcs_max_down(t):
    first(t, "AWS::PCS::ComputeNodeGroup", lambda lid, r: "Login" not in lid)["ScalingConfiguration"].update(
        MaxInstanceCount=4)


def hyperpod_orchestrator(t):
    first(t, "AWS::SageMaker::Cluster")["VpcConfig"]["SecurityGroupIds"] = ["sg-0123456789abcdef0"]


def hyperpod_slurm_count_down(t):
    hyperpod_group(t, "h100")["InstanceCount"] = 3


def pcluster_min_up(t):
    pcluster_resource(t).update(MinCount=2, MaxCount=4)


def pcluster_max_up(t):
    pcluster_resource(t).update(MaxCount=8)


def fsx_storage(gib):
    def change(t):
        first(t, "AWS::FSx::FileSystem")["StorageCapacity"] = gib
    change.__name__ = f"fsx_storage_{gib}"
    return change


def dra_moved(t):
    """Both the directory and the prefix of an association change: a new association beside the old one."""
    dra = first(t, "AWS::FSx::DataRepositoryAssociation", lambda lid, r: "Datasets" in lid)
    dra["FileSystemPath"] = "/datasets-v2"
    dra["DataRepositoryPath"] = {"Fn::Join": ["", ["s3://", {"Ref": "DataBucket"}, "/datasets-v2/"]]}


def existing_data_bucket(t):
    """storage.data_bucket names a bucket the team owns: the created bucket leaves the stack, the associations move."""
    storage = next(st for st in t.values() if "DataBucket" in st["Resources"])
    for lid in [lid for lid in storage["Resources"] if lid.startswith("DataBucket")]:
        del storage["Resources"][lid]
    for _, r in resources(t, "AWS::FSx::DataRepositoryAssociation"):
        path = r["Properties"]["DataRepositoryPath"]["Fn::Join"][1]
        r["Properties"]["DataRepositoryPath"] = "s3://team-datasets" + path[-1]


def pcs_new_prolog(t):
    cluster = first(t, "AWS::PCS::Cluster")
    custom = cluster.setdefault("SlurmConfiguration", {}).setdefault("SlurmCustomSettings", [])
    custom.append({"ParameterName": "HealthCheckProgram", "ParameterValue": "/opt/fmcluster/slurm/health_check.sh"})


ALL = {DATA, NODES, CONTROL_PLANE, CAPACITY}
GATE = "data,nodes,control-plane,capacity"


def case(example, change, present, fails, fragment, absent=frozenset()):
    """One row: after `change`, the classes `present` (and none of `absent`), whether the deploy fails, a phrase the
    report must say, and the exit code under --fail-on data,nodes,control-plane,capacity."""
    code = 1 if present & ALL else 0
    return pytest.param(example, change, set(present), set(absent), fails, fragment, code,
                        id=f"{example}:{change.__name__}")


MATRIX = [
    # EKS: sizes are sent whole, so what the autoscaler added above the template's count goes
    case("eks-p5", eks_count_down, {NODES}, False, "up to 6 x p5.48xlarge (48 GPUs) terminated: count 4 -> 2"),
    case("eks-p5", eks_max_up, {NODES}, False, "up to 4 x p5.48xlarge (32 GPUs) terminated: count 4"),
    case("eks-p5", eks_min_up, {NODES}, False, "whatever the Cluster Autoscaler scaled it to (0 to 8)"),
    case("eks-p5", eks_count_up, {SAFE}, False, "6 x p5.48xlarge (48 GPUs) launched", absent=ALL),
    case("eks-p5", system_count_down, {NODES}, False, "1 x m6i.2xlarge (0 GPUs) terminated: count 2 -> 1"),
    case("eks-p5", eks_capacity_type, {NODES}, True, "cannot replace AWS::EKS::Nodegroup h100 under the same name"),
    case("eks-p5", eks_kubernetes_version, {CONTROL_PLANE}, False, "aws eks update-nodegroup-version",
         absent={DATA, NODES}),
    case("eks-p5", eks_version_jump, {CONTROL_PLANE}, True, "one minor version at a time"),
    case("eks-p5", eks_scheduler_volcano, {CONTROL_PLANE}, False, "jobs it holds suspended stay suspended",
         absent={DATA, NODES}),
    case("eks-p5", zone_move, {DATA, NODES, CONTROL_PLANE}, True,
         "EKS accepts new subnets only in the Availability Zones chosen when the cluster was created"),
    case("eks-p5", launch_template_user_data, {NODES}, False, "1 node(s) at a time", absent={DATA}),
    case("eks-p5", eks_new_group, {SAFE}, False, "new eks group", absent=ALL),
    case("eks-p5", runtime_upgrade, {SAFE}, False, "running nodes keep what they booted with", absent=ALL),
    # EKS on a Capacity Block: the block's nodes are counted, whatever the template's desired size
    case("eks-p6-b200-capacity-block", block_count_down, {NODES}, False, "the Capacity Block group runs 2 node(s)"),
    case("eks-p6-b200-capacity-block", block_removed, {NODES, CAPACITY}, False, "2 x p6-b200.48xlarge (16 GPUs)"),
    case("eks-p6-b200-capacity-block", launch_template_user_data, {NODES, CAPACITY}, False, "scale it to 0 first"),
    # PCS
    case("pcs-p5", pcs_instance_type, {NODES}, True, "ComputeNodeGroup h100 under the same name"),
    case("pcs-p5", pcs_count_down, {NODES}, False, "static instances 4 -> 2", absent={DATA, CONTROL_PLANE}),
    case("pcs-p5", pcs_max_down, {NODES}, False, "up to 4 x p5.48xlarge (32 GPUs) terminated: maximum 8 -> 4"),
    case("pcs-p6-b200-odcr", pcs_capacity_instance_type, {NODES, CAPACITY}, True, "under the same name"),
    case("pcs-p5", node_subnet_cidr, {CONTROL_PLANE, NODES}, True, "1. update or destroy pcs-p5-cluster"),
    case("pcs-p5", pcs_new_prolog, {CONTROL_PLANE}, False, "must already have the script"),
    case("pcs-p5", runtime_upgrade, {SAFE}, False, "boot pointers rewritten", absent=ALL),
    # HyperPod on EKS and on Slurm
    case("hyperpod-eks-p5", hyperpod_count_down, {NODES}, False, "count 4 -> 2", absent={DATA}),
    case("hyperpod-eks-p5en-training-plan", hyperpod_new_group, {SAFE}, False, "new hyperpod group", absent=ALL),
    # with a Karpenter-scaled group, any change of the HyperPod cluster sends that group's InstanceCount 0 again
    case("hyperpod-eks-p5", hyperpod_new_group, {SAFE, NODES}, False, "with InstanceCount 0",
         absent={DATA, CONTROL_PLANE, CAPACITY}),
    case("hyperpod-eks-p5", hyperpod_orchestrator, {CONTROL_PLANE}, True, "AWS::SageMaker::Cluster hpeks-p5 under"),
    case("hyperpod-eks-p5", fsx_deployment_type, {DATA}, False, "the cluster gets a new, empty one"),
    case("hyperpod-eks-p5", alert_email, {SAFE}, False, "AWS::SNS::Subscription", absent=ALL),
    case("hyperpod-eks-p5en-training-plan", hyperpod_training_plan_instance_type, {NODES, CAPACITY}, False,
         "no longer use the reservation or plan"),
    case("hyperpod-slurm-p5", hyperpod_lifecycle, {SAFE}, False, "running ones keep theirs", absent=ALL),
    case("hyperpod-slurm-p5", hyperpod_slurm_count_down, {NODES}, False, "1 x ml.p5.48xlarge (8 GPUs) terminated"),
    # ParallelCluster: its own update checker decides
    case("parallelcluster-p5", pcluster_instance_type, {NODES}, True, "ParallelCluster refuses this update"),
    case("parallelcluster-p5", pcluster_count_down, {NODES}, True, "QueueUpdateStrategy:TERMINATE"),
    case("parallelcluster-p5", pcluster_queue_removed, {NODES}, True, "ParallelCluster refuses this update"),
    case("parallelcluster-p5", pcluster_custom_action, {NODES}, False, "QueueUpdateStrategy DRAIN lets running jobs"),
    case("parallelcluster-p5", pcluster_new_queue, {SAFE}, False, "new parallelcluster group", absent=ALL),
    case("parallelcluster-p5", pcluster_max_up, {SAFE}, False, "", absent=ALL),
    # no orchestrator: shared storage and the data bucket
    case("default", fsx_throughput, {CONTROL_PLANE}, False, "plan for an hour without I/O", absent={DATA, NODES}),
    case("default", fsx_storage(1200), {DATA}, True, "FSx for Lustre storage only grows"),
    case("default", fsx_storage(9600), {CONTROL_PLANE}, False, "unavailable for a few minutes", absent={DATA}),
    case("default", dra_path, {DATA}, True, "FSx refuses overlapping paths or prefixes", absent={NODES}),
    case("default", dra_moved, {DATA}, False, "the files already in the file system stay"),
    case("default", existing_data_bucket, {DATA}, True, "kept in the account, detached from the stack"),
    case("default", launch_template_user_data, {SAFE}, False, "new launches use the new version", absent=ALL),
    # a resource whose logical id moves keeps its name: created before the old one is deleted, it is refused
    case("eks-p5", moved("AWS::EKS::Addon", lambda lid, r: r["Properties"]["AddonName"] == "aws-fsx-csi-driver"),
         {CONTROL_PLANE}, True, "moves from"),
    case("hyperpod-eks-p5en-serving", moved("AWS::IAM::OIDCProvider"), {CONTROL_PLANE}, True,
         "the service refuses a second resource with that key"),
    # Mountpoint for Amazon S3's directory bucket holds the mounted data as the data bucket does
    case("pcs-p6-b200-odcr", directory_bucket_zone, {DATA}, False, "the cluster gets a new, empty one"),
]


@pytest.mark.parametrize("example, change, present, absent, fails, fragment, code", MATRIX)
def test_each_change_says_its_class_consequence_and_exit(example, change, present, absent, fails, fragment, code,
                                                         tmp_path, capsys):
    """Through the command line, as CI runs it: two template folders, JSON out, the four-class gate."""
    old = templates(example)
    new = copy.deepcopy(old)
    change(new)
    sides = []
    for side, ts in (("old", old), ("new", new)):
        folder = tmp_path / side
        folder.mkdir()
        for name, t in ts.items():
            (folder / f"{name}.template.json").write_text(json.dumps(t))
        sides.append(str(folder))
    assert main(["diff", *sides, "--json", "--fail-on", GATE]) == code
    report = json.loads(capsys.readouterr().out)
    found = set(report["classes"])
    assert present <= found and not (absent & found), found
    assert report["deploy_fails"] is fails, [f["text"] for f in report["findings"] if f.get("deploy_fails")]
    assert fragment in json.dumps(report), [f["text"] for f in report["findings"]]
    if fails:  # a refused change is never presented as safe, and says its way through
        failing = [f for f in report["findings"] if f.get("deploy_fails")]
        assert all(f["class"] != SAFE and "Way through" in f["text"] for f in failing)


def test_the_matrix_covers_every_kind_and_at_least_25_changes():
    examples = {p.values[0] for p in MATRIX}
    assert {"default", "pcs-p5", "hyperpod-slurm-p5", "parallelcluster-p5", "eks-p5", "hyperpod-eks-p5"} <= examples
    assert len(MATRIX) >= 25


def test_an_earlier_releases_block_at_size_0_is_counted_as_the_block_and_its_count_down_scales_it_to_zero():
    """A cluster deployed when Capacity Block groups were created at desired size 0: a count change sends that 0 over
    the running block (the hazard this release removes); moving to this release sends the block's count instead."""
    old = templates("eks-p6-b200-capacity-block")
    block_created_at_zero(old)
    down = copy.deepcopy(old)
    earlier_block_count_down(down)
    (finding,) = [f for f in compare(old, down).findings if f.cls == NODES]
    assert finding.gpus == 16 and "sends the template's DesiredSize 0" in finding.text
    upgrade = compare(old, templates("eks-p6-b200-capacity-block"))
    assert NODES not in upgrade.classes() and any("count 2" in f.text for f in upgrade.findings)


def test_no_change_reports_nothing():
    report = compare(templates("eks-p5"), templates("eks-p5"))
    assert report.findings == [] and not any(report.stacks.values())


def test_a_rolling_update_counts_gpus_and_says_it_drains_within_budgets_one_node_at_a_time():
    report = edit("eks-p5", launch_template_user_data)
    gpu = [f for f in report.findings if f.cls == NODES and f.gpus]
    assert [f.gpus for f in gpu] == [32]
    assert "regardless of PodDisruptionBudgets" not in gpu[0].jobs  # ForceUpdateEnabled is off
    assert "1 node(s) at a time" in gpu[0].jobs and "UpdateStrategy MINIMAL" in gpu[0].jobs
    assert any("managed-node-update-behavior" in s for s in gpu[0].sources)


def test_a_forced_update_says_pods_are_evicted_regardless_of_budgets():
    """A cluster deployed by an earlier fmcluster, whose node groups force their updates."""
    old = copy.deepcopy(templates("eks-p5"))
    for _, r in resources(old, "AWS::EKS::Nodegroup"):
        r["Properties"]["ForceUpdateEnabled"] = True
    new = copy.deepcopy(old)
    launch_template_user_data(new)
    (gpu,) = [f for f in compare(old, new).findings if f.cls == NODES and f.gpus]
    assert "regardless of PodDisruptionBudgets" in gpu.jobs


def test_a_runtime_upgrade_says_new_nodes_read_it_from_their_pointer_and_running_ones_keep_theirs():
    (finding,) = [f for f in edit("pcs-p5", runtime_upgrade).findings if "boot pointers" in f.text]
    assert finding.cls == SAFE and "h100" in finding.text and "level, runtime" in finding.text
    assert "running nodes keep what they booted with" in finding.text


def test_the_pointer_metadata_name_is_the_one_the_runtime_construct_writes():
    from fmcluster.constructs.node_bootstrap import POINTERS_METADATA

    assert BOOT_POINTERS == POINTERS_METADATA


def test_count_down_of_an_elastic_group_counts_every_node_the_autoscaler_may_have_added():
    """count 4 -> 2 on a group that may run up to 8: the desired size 2 is sent over whatever runs."""
    (finding,) = [f for f in edit("eks-p5", eks_count_down).findings if f.cls == NODES]
    assert finding.gpus == 48 and "count 4 -> 2" in finding.text and finding.text.startswith("up to 6 x")
    assert "does not respect PodDisruptionBudgets" in finding.jobs


def test_parallelcluster_instance_type_is_refused_while_the_fleet_runs():
    """ParallelCluster's own checker says so; the table fmcluster keeps agrees (test_diff_pcluster_policies)."""
    (finding,) = [f for f in edit("parallelcluster-p5", pcluster_instance_type).findings if f.cls == NODES]
    assert finding.fails and finding.jobs.startswith("untouched: the update is refused")
    assert "InstanceType p5.48xlarge -> p5en.48xlarge (update policy COMPUTE_FLEET_STOP" in finding.text


def test_parallelcluster_drain_lets_running_jobs_finish_on_a_queue_setting():
    (finding,) = [f for f in edit("parallelcluster-p5", pcluster_custom_action).findings if f.cls == NODES]
    assert finding.jobs.startswith("survive") and "DRAIN" in finding.jobs


def test_fsx_deployment_type_is_replacement_from_the_documented_table_not_the_schema():
    verdict = judge("AWS::FSx::FileSystem", [("LustreConfiguration", "DeploymentType")])
    assert verdict.replaced and "documented" in verdict.because[0] and "docs.aws.amazon.com" in verdict.because[0]
    data = {f.where: f.text for f in edit("default", fsx_deployment_type).findings if f.cls == DATA}
    assert "UpdateReplacePolicy Retain" in data["fm-dev-storage/FileSystem"]
    # the associations name the file system: a new file system means new associations too
    assert {"fm-dev-storage/DraDatasetscb6de1db", "fm-dev-storage/DraCheckpoints13df7a11"} <= set(data)


def test_create_only_properties_come_from_the_provider_schemas():
    assert judge("AWS::EKS::Nodegroup", [("InstanceTypes", "0")]).replaced is True
    assert judge("AWS::EKS::Nodegroup", [("ScalingConfig", "DesiredSize")]).replaced is False
    assert judge("Custom::PclusterCluster", [("ClusterConfiguration",)]).replaced is None


def test_a_changed_subnet_names_the_order_of_operations_for_the_export_in_use():
    report = edit("pcs-p5", node_subnet_cidr)
    (export,) = [e for e in report.exports if "Subnet" in e.name]
    assert export.importers == ["pcs-p5-cluster"]
    text = next(f.text for f in report.findings if f.where == f"pcs-p5-network export {export.name}")
    assert "1. update or destroy pcs-p5-cluster" in text and "2. deploy pcs-p5-network" in text
    (subnet,) = [f for f in report.findings if f.where.startswith("pcs-p5-network/VpcNodes") and "Subnet replaced" in f.text]
    assert subnet.cls == CONTROL_PLANE and "replaced (CidrBlock)" in subnet.text
    assert "node_subnet_prefix" in subnet.text and "docs/network.md" in subnet.text


def test_switching_orchestrator_removes_the_old_control_plane_and_nodes():
    """eks-p5's stacks replaced by what pcs-p5 synthesizes under the same names: the one-line switch."""
    old = templates("eks-p5")
    new = json.loads(json.dumps(templates("pcs-p5")).replace("pcs-p5", "eks-p5"))
    report = compare(old, new)
    assert {NODES, CONTROL_PLANE} <= set(report.classes())
    assert any("AWS::EKS::Cluster removed" in f.text for f in report.findings)
    assert report.gpus_affected >= 32


def test_parallelcluster_count_down_is_refused_under_drain():
    (finding,) = [f for f in edit("parallelcluster-p5", pcluster_count_down).findings if f.cls == NODES]
    assert finding.fails and "3 x p5.48xlarge (24 GPUs) terminated: count 4 -> 1" in finding.text
    assert "MinCount 4 -> 1 (update policy RESIZE_UPDATE_STRATEGY_ON_REMOVE" in finding.text


def test_without_cfn_lints_schemas_the_report_says_so_and_documented_facts_still_apply(monkeypatch):
    from fmcluster.diff import schemas

    schemas.create_only.cache_clear()
    monkeypatch.setattr(schemas, "_schema_root", lambda: None)
    try:
        report = edit("default", fsx_deployment_type)
        assert any("schemas are not installed" in n for n in report.notes)
        assert any(f.cls == DATA and f.where == "fm-dev-storage/FileSystem" for f in report.findings)
        assert judge("AWS::EKS::Nodegroup", [("InstanceTypes", "0")]).replaced is None  # unknown, not "in place"
    finally:
        schemas.create_only.cache_clear()


def test_a_new_slurm_prolog_on_pcs_says_running_nodes_must_have_the_script_first():
    """Turning on a PCS cluster setting that names a node script (Prolog, Epilog, HealthCheckProgram) is an in-place
    update, but slurmd drains a node where the script is missing: the reviewer is told before it deploys."""
    def add_health_check(t):
        cluster = first(t, "AWS::PCS::Cluster")
        custom = cluster.setdefault("SlurmConfiguration", {}).setdefault("SlurmCustomSettings", [])
        custom.append({"ParameterName": "HealthCheckProgram", "ParameterValue": "/opt/fmcluster/slurm/health_check.sh"})

    report = edit("pcs-p5", add_health_check)
    (finding,) = [f for f in report.findings if f.cls == CONTROL_PLANE]
    assert "HealthCheckProgram=/opt/fmcluster/slurm/health_check.sh on every node" in finding.text
    assert "slurmd drains it" in finding.text
    unrelated = edit("pcs-p5", lambda t: first(t, "AWS::PCS::Cluster").update(Size="MEDIUM"))
    assert not any("on every node" in f.text for f in unrelated.findings)


def hyperpod_eks_count_up(t):
    cluster = first(t, "AWS::SageMaker::Cluster")
    next(g for g in cluster["InstanceGroups"] if g["InstanceGroupName"] == "h100")["InstanceCount"] = 5


def karpenter_pool_only(t):
    for lid, r in resources(t, "Custom::AWSCDK-EKS-KubernetesResource"):
        if "Karpenter" in lid:
            r["Properties"]["Manifest"] = r["Properties"]["Manifest"].replace('"10m"', '"20m"')


def test_an_update_of_the_hyperpod_cluster_warns_for_the_karpenter_scaled_group_it_resends_at_zero():
    """CloudFormation sends every instance group with any change of the HyperPod cluster: the Karpenter-scaled group
    goes again with InstanceCount 0, and what HyperPod does with the nodes Karpenter started is not documented."""
    findings = edit("hyperpod-eks-p5", hyperpod_eks_count_up).findings
    (resent,) = [f for f in findings if f.where.endswith("/prep")]
    assert resent.cls == NODES and "InstanceCount 0" in resent.text and "Karpenter" in resent.text
    assert "kubectl get nodes -l fmcluster.io/node-group=prep" in resent.jobs and resent.sources
    assert not any(f.where.endswith("/prep") for f in edit("hyperpod-eks-p5", karpenter_pool_only).findings), \
        "a change that leaves the HyperPod cluster alone re-sends nothing"

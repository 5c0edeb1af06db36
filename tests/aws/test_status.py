"""status: stacks from CloudFormation (Stubber / moto), resources from moto or stubs by type."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, List

import boto3
import pytest
from helpers.aws import ACCOUNT, REGION, make_ctx, make_spec, stub_operation, stubbed

from fmcluster.aws.status import collect_status
from fmcluster.registry import status_describers

pytestmark = pytest.mark.usefixtures("moto")
T0 = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)


def stack(name: str, status: str, reason: str = "") -> Dict[str, Any]:
    s: Dict[str, Any] = {"StackName": name, "StackStatus": status, "CreationTime": T0}
    if reason:
        s["StackStatusReason"] = reason
    return {"Stacks": [s]}


def res(logical: str, rtype: str, physical: str, status: str = "CREATE_COMPLETE", reason: str = "") -> Dict[str, Any]:
    r = {"LogicalResourceId": logical, "ResourceType": rtype, "PhysicalResourceId": physical,
         "ResourceStatus": status, "LastUpdatedTimestamp": T0}
    if reason:
        r["ResourceStatusReason"] = reason
    return r


def stub_stacks(ctx: Any, stacks: Dict[str, Any]) -> Any:
    """stacks: part -> None (absent) or (status, [resource summaries])."""
    cfn = stubbed(ctx, "cloudformation")
    for part in ("network", "storage", "observability", "cluster"):
        name = f"fm-dev-{part}"
        if stacks.get(part) is None:
            cfn.add_client_error("describe_stacks", "ValidationError", f"Stack with id {name} does not exist",
                                 expected_params={"StackName": name})
            continue
        status, resources = stacks[part]
        cfn.add_response("describe_stacks", stack(name, status), {"StackName": name})
        cfn.add_response("list_stack_resources", {"StackResourceSummaries": resources}, {"StackName": name})
    return cfn


def moto_resources() -> Dict[str, str]:
    fsx = boto3.client("fsx", region_name=REGION).create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=["subnet-0123456789abcdef0"],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250})["FileSystem"]
    ws = boto3.client("amp", region_name=REGION).create_workspace(alias="fm-dev")
    sm = boto3.client("sagemaker", region_name=REGION)
    arn = sm.create_cluster(
        ClusterName="fm-dev",
        InstanceGroups=[{
            "InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "ThreadsPerCore": 1,
            "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/hp",
            "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/x/", "OnInitComplete": "on_init_complete.sh"},
        }],
        VpcConfig={"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
    )["ClusterArn"]
    return {"fsx": fsx["FileSystemId"], "amp": ws["arn"], "hyperpod": arn}


def test_full_status_at_a_glance() -> None:
    ids = moto_resources()
    ctx = make_ctx(make_spec(), account=None)
    stub_stacks(ctx, {
        "network": ("CREATE_COMPLETE", [res("Vpc", "AWS::EC2::VPC", "vpc-0123456789abcdef0")]),
        "storage": ("CREATE_COMPLETE", [
            res("Lustre", "AWS::FSx::FileSystem", ids["fsx"]),
            res("DataDra", "AWS::FSx::DataRepositoryAssociation", "dra-0123456789abcdef0"),
        ]),
        "observability": ("UPDATE_COMPLETE", [res("Workspace", "AWS::APS::Workspace", ids["amp"])]),
        "cluster": ("CREATE_COMPLETE", [
            res("HyperPod", "AWS::SageMaker::Cluster", ids["hyperpod"]),
            res("GpuPlacement", "AWS::EC2::PlacementGroup", "fm-dev-gpu"),
        ]),
    })
    fsx = boto3.client("fsx", region_name=REGION)
    ec2 = boto3.client("ec2", region_name=REGION)
    ctx.aws.set("fsx", fsx)
    ctx.aws.set("ec2", ec2)

    def with_lifecycle(parsed: Dict[str, Any], **_: Any) -> None:  # moto omits Lifecycle; AWS always sends it
        for fs in parsed.get("FileSystems", []):
            fs.setdefault("Lifecycle", "AVAILABLE")

    fsx.meta.events.register("after-call.fsx.DescribeFileSystems", with_lifecycle)
    stub_operation(fsx, "DescribeDataRepositoryAssociations", {"Associations": [{
        "AssociationId": "dra-0123456789abcdef0", "FileSystemId": ids["fsx"], "Lifecycle": "AVAILABLE",
        "FileSystemPath": "/data", "DataRepositoryPath": "s3://fm-dev-data/datasets/"}]})
    stub_operation(ec2, "DescribePlacementGroups", {"PlacementGroups": [
        {"GroupName": "fm-dev-gpu", "State": "available", "Strategy": "cluster"}]})
    status = collect_status(ctx.spec, ctx.aws, ctx=ctx, registered=status_describers())
    text = status.render_text()
    data = status.to_dict()
    assert data["account"] == ACCOUNT
    parts = {s["part"]: s for s in data["stacks"]}
    storage = {r["type"]: r for r in parts["storage"]["resources"]}
    assert storage["FSx file system"]["state"] == "AVAILABLE" and "PERSISTENT_2 1200 GiB" in storage["FSx file system"][
        "detail"]
    assert storage["FSx DRA"]["detail"] == "/data <-> s3://fm-dev-data/datasets/"
    cluster = {r["type"]: r for r in parts["cluster"]["resources"]}
    assert cluster["placement group"]["detail"] == "strategy cluster"
    hp = cluster["HyperPod cluster"]
    assert hp["name"] == "fm-dev" and hp["children"][0]["name"] == "gpu"
    assert parts["observability"]["resources"][0]["type"] == "AMP workspace"
    assert "OK    fm-dev-network" in text and "FSx DRA dra-0123456789abcdef0: AVAILABLE" in text
    assert status.overall == "ok" and "nodes: 2 Running" in text, text
    assert data["ok"] == (status.exit_code == 0)


def test_failed_deploy_shows_the_reason() -> None:
    ctx = make_ctx(make_spec())
    stub_stacks(ctx, {
        "network": ("CREATE_COMPLETE", []),
        "cluster": ("ROLLBACK_COMPLETE", [res("Gpu", "AWS::EC2::LaunchTemplate", "", "CREATE_FAILED",
                                              "Resource handler returned message: InsufficientInstanceCapacity")]),
    })
    status = collect_status(ctx.spec, ctx.aws, ctx=ctx, registered=status_describers())
    assert status.overall == "failed" and status.exit_code == 1
    text = status.render_text()
    assert "FAIL  fm-dev-cluster" in text and "InsufficientInstanceCapacity" in text
    assert "-     fm-dev-storage" in text and "not deployed" in text


def test_pcs_cluster_and_node_groups() -> None:
    ctx = make_ctx(make_spec())
    arn = f"arn:aws:pcs:us-east-1:{ACCOUNT}:cluster/pcs_abcdef1234"
    stub_stacks(ctx, {"cluster": ("CREATE_COMPLETE", [res("Pcs", "AWS::PCS::Cluster", arn)])})
    pcs = stubbed(ctx, "pcs")
    pcs.add_response("get_cluster", {"cluster": {
        "name": "fm-dev", "id": "pcs_abcdef1234", "arn": arn, "status": "ACTIVE", "createdAt": T0, "modifiedAt": T0,
        "scheduler": {"type": "SLURM", "version": "24.11"}, "size": "SMALL",
        "networking": {}}}, {"clusterIdentifier": "pcs_abcdef1234"})
    groups: List[Dict[str, Any]] = [
        {"name": n, "id": f"pcs_{n}12345", "arn": f"{arn}/computenodegroup/pcs_{n}12345", "clusterId": "pcs_abcdef1234",
         "createdAt": T0, "modifiedAt": T0, "status": s} for n, s in (("gpu", "ACTIVE"), ("login", "CREATING"))]
    pcs.add_response("list_compute_node_groups", {"computeNodeGroups": groups}, {"clusterIdentifier": "pcs_abcdef1234"})
    status = collect_status(ctx.spec, ctx.aws, ctx=ctx, registered=status_describers())
    [item] = status.stacks[3].resources
    assert item.type == "PCS cluster" and item.state == "ACTIVE"
    assert [(c.name, c.health) for c in item.children] == [("gpu", "ok"), ("login", "pending")]
    assert status.overall == "in progress" and status.exit_code == 1


def test_unreadable_resource_is_unknown_not_a_crash() -> None:
    ctx = make_ctx(make_spec())
    stub_stacks(ctx, {"storage": ("CREATE_COMPLETE", [res("Lustre", "AWS::FSx::FileSystem", "fs-0123456789abcdef0")])})
    fsx = stubbed(ctx, "fsx")
    fsx.add_client_error("describe_file_systems", "AccessDenied", "denied")
    status = collect_status(ctx.spec, ctx.aws, ctx=ctx, registered=status_describers())
    [item] = status.stacks[1].resources
    assert item.health == "unknown" and "cannot check: access denied to fsx:DescribeFileSystems" in item.detail
    assert status.exit_code == 1


def test_real_moto_stack_and_nothing_deployed() -> None:
    spec = make_spec()
    ctx = make_ctx(spec)
    status = collect_status(spec, ctx.aws, ctx=ctx, registered=status_describers())
    assert status.overall == "not deployed" and status.exit_code == 1
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="fm-dev-network", TemplateBody='{"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}')
    status = collect_status(spec, make_ctx(spec).aws)
    assert status.stacks[0].state == "CREATE_COMPLETE" and status.overall == "ok" and status.exit_code == 0


def test_status_shows_which_runtime_each_node_runs_and_its_verdict() -> None:
    """Nodes report after their boot validation (runtime/node_report.py); a node launched after a deploy runs the new
    runtime, one launched before keeps the old: status tells them apart against the group's pointer now. Reports of
    instances no longer running are left out."""
    import json

    from fmcluster.aws import node_reports
    from fmcluster.runtime import node_report

    assert node_reports.SCHEMA == node_report.SCHEMA
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="fm-dev-runtime")
    new, old = "c" * 64, "d" * 64
    s3.put_object(Bucket="fm-dev-runtime", Key="boot/groups/h100.json",
                  Body=json.dumps({"schema": 1, "group": "h100", "runtime": {"sha256": new}}))
    ec2 = boto3.client("ec2", region_name=REGION)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ids = [i["InstanceId"] for i in ec2.run_instances(ImageId=image, MinCount=3, MaxCount=3)["Instances"]]
    ec2.terminate_instances(InstanceIds=[ids[2]])
    for instance, runtime, verdict in ((ids[0], new, "pass"), (ids[1], old, "fail"), (ids[2], old, "pass")):
        report = node_report.build({"group": "h100", "runtime": {"sha256": runtime},
                                    "reports": {"pointer": "boot/groups/h100.json", "platform": "ec2"}},
                                   {"verdict": verdict, "failing": ["gpu.count"] if verdict == "fail" else []},
                                   instance, 0)
        s3.put_object(Bucket="fm-dev-runtime", Key=f"node-reports/h100/{instance}.json", Body=json.dumps(report))
    s3.create_bucket(Bucket="fm-dev-data")  # a bucket without reports says nothing
    ctx = make_ctx(make_spec())
    stub_stacks(ctx, {"cluster": ("UPDATE_COMPLETE", [res("NodeRuntimeBucket", "AWS::S3::Bucket", "fm-dev-runtime"),
                                                      res("DataBucket", "AWS::S3::Bucket", "fm-dev-data")])})
    status = collect_status(ctx.spec, ctx.aws, ctx=ctx, registered=status_describers())
    [item] = status.stacks[3].resources
    assert item.type == "node runtimes" and item.health == "warn" and item.state == "2 node(s) reported"
    assert "1 on the runtime their group's pointer names now, 1 on an older one" in item.detail
    assert "1 report(s) of instances no longer running left out" in item.detail
    lines = {c.name: c for c in item.children}
    assert lines[ids[0]].state == f"h100: runtime {new[:12]} (current), validation pass"
    assert lines[ids[1]].state == f"h100: runtime {old[:12]} (older), validation fail"
    assert "failing: gpu.count" in lines[ids[1]].detail and ids[2] not in lines

"""`fmcluster diff SPEC --deployed`: change sets created, read for their Replacement field, never executed, always
deleted; CloudFormation is stubbed with botocore's Stubber (no network, no credentials)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber

from fmcluster.cli.diff_deployed import deployed_report
from fmcluster.diff.changeset import ChangeSetError, compare_deployed
from fmcluster.diff.findings import NODES
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parents[2]
NETWORK, CLUSTER = "pcs-p5-network", "pcs-p5-cluster"
NODE_GROUP, LAUNCH_TEMPLATE = "PcsH100NodeGroupA95A2CCC", "H100LaunchTemplate29D9BB86"


def deployed_templates():
    return {s: json.loads((ROOT / "templates" / "pcs-p5" / f"{s}.template.json").read_text()) for s in (NETWORK, CLUSTER)}


def changed_templates():
    new = copy.deepcopy(deployed_templates())
    new[CLUSTER]["Resources"][LAUNCH_TEMPLATE]["Properties"]["LaunchTemplateData"]["UserData"] = {"Fn::Base64": "x"}
    return new


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def cfn_client():
    return boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def stub_stack(stub: Stubber, stack: str, template, statuses) -> None:
    stub.add_response("describe_stacks", {"Stacks": [{"StackName": stack, "CreationTime": "2026-01-01T00:00:00Z",
                                                      "StackStatus": "UPDATE_COMPLETE"}]}, {"StackName": stack})
    stub.add_response("get_template", {"TemplateBody": json.dumps(template)},
                      {"StackName": stack, "TemplateStage": "Original"})
    stub.add_response("create_change_set", {"Id": "arn:cs", "StackId": "arn:stack"},
                      {"StackName": stack, "ChangeSetName": ANY, "ChangeSetType": "UPDATE", "Capabilities": ANY,
                       "Description": ANY, "TemplateBody": ANY})
    for status in statuses:
        stub.add_response("describe_change_set", status, {"StackName": stack, "ChangeSetName": ANY})
    stub.add_response("delete_change_set", {}, {"StackName": stack, "ChangeSetName": ANY})


NO_CHANGES = {"Status": "FAILED", "StatusReason": "The submitted information didn't contain changes. Submit different "
              "information to create a change set."}
IN_PROGRESS = {"Status": "CREATE_IN_PROGRESS"}
CLUSTER_CHANGES = {"Status": "CREATE_COMPLETE", "Changes": [
    {"Type": "Resource", "ResourceChange": {"Action": "Modify", "LogicalResourceId": LAUNCH_TEMPLATE,
                                            "ResourceType": "AWS::EC2::LaunchTemplate", "Replacement": "False"}},
    {"Type": "Resource", "ResourceChange": {"Action": "Modify", "LogicalResourceId": NODE_GROUP,
                                            "ResourceType": "AWS::PCS::ComputeNodeGroup", "Replacement": "True"}},
]}


def test_the_change_sets_replacement_field_decides_and_every_change_set_is_deleted():
    cfn, clock = cfn_client(), FakeClock()
    with Stubber(cfn) as stub:
        stub_stack(stub, CLUSTER, deployed_templates()[CLUSTER], [IN_PROGRESS, CLUSTER_CHANGES])  # stacks in name order
        stub_stack(stub, NETWORK, deployed_templates()[NETWORK], [NO_CHANGES])
        deployed = compare_deployed(cfn, changed_templates(), timeout_s=60, clock=clock, sleep=clock.sleep)
        stub.assert_no_pending_responses()  # both change sets deleted; none executed (no execute_change_set stubbed)
    assert clock.slept == [5.0]
    assert deployed.decided == {(CLUSTER, LAUNCH_TEMPLATE): "False", (CLUSTER, NODE_GROUP): "True"}
    from fmcluster.diff import compare

    result = compare(deployed.templates, changed_templates(), decided=deployed.decided)
    (finding,) = [f for f in result.findings if f.cls == NODES and f.gpus]
    # the group keeps its name (h100): CloudFormation cannot replace it, the deploy would fail
    assert "cannot replace AWS::PCS::ComputeNodeGroup h100 under the same name" in finding.text and finding.fails
    assert finding.gpus == 32
    (change,) = [c for c in result.stacks[CLUSTER] if c.logical_id == NODE_GROUP]
    assert change.because == ["change set: Replacement True"]


def test_the_cli_path_reports_with_the_specs_region():
    cfn = cfn_client()
    with Stubber(cfn) as stub:
        stub_stack(stub, CLUSTER, deployed_templates()[CLUSTER], [CLUSTER_CHANGES])
        stub_stack(stub, NETWORK, deployed_templates()[NETWORK], [NO_CHANGES])
        report = deployed_report(load_spec(ROOT / "examples" / "pcs-p5.yaml"), changed_templates(), timeout_s=60,
                                 template_bucket=None, clients=(cfn, None))
        stub.assert_no_pending_responses()
    assert NODES in report.classes()


def test_a_change_set_that_never_finishes_is_an_error_and_is_still_deleted():
    cfn, clock = cfn_client(), FakeClock()
    with Stubber(cfn) as stub:
        stub_stack(stub, NETWORK, deployed_templates()[NETWORK], [IN_PROGRESS] * 3)
        with pytest.raises(ChangeSetError, match="not ready within 10s"):
            compare_deployed(cfn, {NETWORK: deployed_templates()[NETWORK]}, timeout_s=10, clock=clock,
                             sleep=clock.sleep)
        stub.assert_no_pending_responses()


def test_a_stack_not_deployed_yet_is_all_additions_without_a_change_set():
    cfn = cfn_client()
    with Stubber(cfn) as stub:
        stub.add_client_error("describe_stacks", "ValidationError", f"Stack with id {NETWORK} does not exist",
                              expected_params={"StackName": NETWORK})
        deployed = compare_deployed(cfn, {NETWORK: deployed_templates()[NETWORK]}, timeout_s=10)
        stub.assert_no_pending_responses()
    assert deployed.templates == {} and deployed.decided == {}


def test_a_template_over_the_body_limit_needs_a_bucket():
    cfn = cfn_client()
    big = copy.deepcopy(deployed_templates()[NETWORK])
    big["Description"] = "x" * 60_000
    with Stubber(cfn) as stub:
        stub.add_response("describe_stacks", {"Stacks": [{"StackName": NETWORK, "CreationTime": "2026-01-01T00:00:00Z",
                                                          "StackStatus": "UPDATE_COMPLETE"}]}, {"StackName": NETWORK})
        stub.add_response("get_template", {"TemplateBody": json.dumps(deployed_templates()[NETWORK])},
                          {"StackName": NETWORK, "TemplateStage": "Original"})
        with pytest.raises(ChangeSetError, match="--template-bucket"):
            compare_deployed(cfn, {NETWORK: big}, timeout_s=10)
        stub.assert_no_pending_responses()  # no change set was created, so none is left behind

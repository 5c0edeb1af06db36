"""HyperPod reports its autoscaling's status apart from the cluster's, and CDK's kubectl handler retries a failed
apply only on "i/o timeout": the Karpenter objects wait for a custom resource that ends when DescribeCluster says
AutoScaling InService (autoscaling_waiter/index.py), run here against a stand-in SageMaker and Lambda, and read in the
committed hyperpod-eks-p5 template."""

from __future__ import annotations

import importlib.util
import json
from typing import Any, Dict, List

import pytest
from helpers import ROOT, resources_of

spec = importlib.util.spec_from_file_location(
    "autoscaling_waiter", ROOT / "fmcluster/orchestrators/hyperpod_eks/autoscaling_waiter/index.py")
waiter = importlib.util.module_from_spec(spec)
spec.loader.exec_module(waiter)

EVENT = {"RequestType": "Create", "ResourceProperties": {"ClusterName": "hpeks-p5"}, "StackId": "s", "RequestId": "r",
         "LogicalResourceId": "l", "ResponseURL": "https://example.invalid"}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class Context:
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:waiter"

    def __init__(self, clock: Clock, budget_s: float) -> None:
        self.clock, self.end = clock, clock.t + budget_s

    def get_remaining_time_in_millis(self) -> int:
        return int((self.end - self.clock.t) * 1000)


class Fakes:
    """SageMaker answering the statuses given, one per call (the last repeats), and Lambda recording invokes."""

    def __init__(self, statuses: List[Dict[str, Any]]) -> None:
        self.statuses, self.invokes, self.answers = list(statuses), [], []

    def client(self, service: str) -> Any:
        fakes = self

        class SageMaker:
            def describe_cluster(self, ClusterName: str) -> Dict[str, Any]:  # noqa: N803 - boto3's name
                assert ClusterName == "hpeks-p5"
                return fakes.statuses.pop(0) if len(fakes.statuses) > 1 else fakes.statuses[0]

        class Lambda:
            def invoke(self, **kw: Any) -> None:
                fakes.invokes.append(kw)

        return SageMaker() if service == "sagemaker" else Lambda()

    def answer(self, event: Dict[str, Any], status: str, reason: str, physical_id: str) -> None:
        self.answers.append((status, reason))


def run(statuses: List[Dict[str, Any]], *, budget_s: float = 900, event: Dict[str, Any] = EVENT, clock=None):
    clock = clock or Clock()
    fakes = Fakes(statuses)
    waiter.handler(event, Context(clock, budget_s), client=fakes.client, answer=fakes.answer, now=clock.now,
                   sleep=clock.sleep)
    return fakes


def scaling(status: str, message: str = "") -> Dict[str, Any]:
    return {"AutoScaling": {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": status,
                            **({"FailureMessage": message} if message else {})}}


def test_it_ends_when_autoscaling_is_in_service():
    fakes = run([scaling("Creating"), scaling("Creating"), scaling("InService")])
    assert fakes.answers == [("SUCCESS", "autoscaling InService")] and fakes.invokes == []


def test_hyperpods_failure_fails_the_resource_with_its_message():
    fakes = run([scaling("Creating"), scaling("Failed", "ClusterRole cannot be assumed")])
    assert fakes.answers == [("FAILED", "HyperPod's autoscaling failed: ClusterRole cannot be assumed")]


def test_before_lambdas_limit_it_hands_over_to_a_new_run_of_itself_without_answering():
    fakes = run([scaling("Creating")], budget_s=300)
    assert fakes.answers == []
    (invoke,) = fakes.invokes
    assert invoke["InvocationType"] == "Event" and invoke["FunctionName"] == Context.invoked_function_arn
    handed = json.loads(invoke["Payload"])
    assert handed[waiter.STARTED] == 1000.0 and handed["ResponseURL"] == EVENT["ResponseURL"]


def test_a_wait_past_fifty_minutes_fails_saying_the_status():
    clock = Clock()
    clock.t += waiter.MAX_WAIT_S
    fakes = run([scaling("Creating")], event={**EVENT, waiter.STARTED: 1000.0}, clock=clock)
    assert fakes.answers == [("FAILED", "HyperPod's autoscaling is still Creating after 50 minutes")]


@pytest.mark.parametrize("answer", [{}, {"AutoScaling": {"Mode": "Disable"}}])
def test_a_cluster_without_autoscaling_fails_rather_than_wait(answer):
    fakes = run([answer])
    assert fakes.answers[0][0] == "FAILED" and "no autoscaling" in fakes.answers[0][1]


def test_delete_answers_at_once():
    fakes = run([scaling("Deleting")], event={**EVENT, "RequestType": "Delete"})
    assert fakes.answers == [("SUCCESS", "nothing to delete")]


def test_the_karpenter_objects_wait_for_it_and_it_waits_for_the_cluster():
    template = json.loads((ROOT / "templates/hyperpod-eks-p5/hpeks-p5-cluster.template.json").read_text())
    ((ready_id, ready),) = resources_of(template, "Custom::HyperPodAutoscalingReady").items()
    ((cluster_id, _),) = resources_of(template, "AWS::SageMaker::Cluster").items()
    assert cluster_id in ready["DependsOn"]
    (karpenter,) = [r for lid, r in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").items()
                    if "Karpenter" in lid]
    assert ready_id in karpenter["DependsOn"]
    (policy,) = [r for lid, r in resources_of(template, "AWS::IAM::Policy").items() if "AutoscalingReady" in lid]
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["DescribeTheCluster"]["Action"] == "sagemaker:DescribeCluster"
    assert statements["DescribeTheCluster"]["Resource"] == {"Fn::GetAtt": [cluster_id, "ClusterArn"]}
    (permission,) = resources_of(template, "AWS::Lambda::Permission").values()
    assert permission["Properties"]["Action"] == "lambda:InvokeFunction"

"""CloudFormation custom resource ``Custom::HyperPodAutoscalingReady``: ends its Create or Update once the HyperPod
cluster named ``ClusterName`` reports its autoscaling ``InService`` (DescribeCluster's ``AutoScaling.Status``:
InService | Failed | Creating | Deleting, SageMaker API reference, ClusterAutoScalingConfigOutput), so that the
Karpenter objects applied after it find HyperPod's Karpenter and its kinds. The HyperPod cluster resource completes
when the cluster is InService, and autoscaling reports a status of its own; CDK's kubectl handler retries a failed
apply only on "i/o timeout", so a manifest applied before HyperPod installs Karpenter's kinds fails the stack.

It asks every POLL_S seconds. ``Failed`` fails the resource with HyperPod's ``FailureMessage``; a status that is not
InService after MAX_WAIT_S fails it saying which. A Lambda run lasts at most 15 minutes: with less than a poll and
MARGIN_S left it hands the same event to a new run of itself (asynchronous invoke; the event carries when the wait
started) and ends without answering; the run that sees the end answers CloudFormation (the ResponseURL), also when it
fails. Delete answers at once. Runs in AWS Lambda: the Python standard library and the runtime's boto3.

Properties: ClusterName.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any, Callable, Dict, Optional, Tuple

POLL_S = 20
MARGIN_S = 60
MAX_WAIT_S = 50 * 60  # inside CloudFormation's one-hour wait for a custom resource
STARTED = "FmclusterWaitStarted"  # added to the event handed to the next run


def autoscaling_status(client: Any, cluster: str) -> Tuple[Optional[str], str]:
    """(AutoScaling.Status or None, FailureMessage) of the HyperPod cluster."""
    answer = client.describe_cluster(ClusterName=cluster)
    scaling = answer.get("AutoScaling") or {}
    return scaling.get("Status"), str(scaling.get("FailureMessage") or "")


def decide(status: Optional[str], message: str, *, waited_s: float, left_s: float) -> Tuple[str, str]:
    """What to do now: ("SUCCESS" | "FAILED", reason), ("WAIT", "") or ("CONTINUE", "") (hand over to a new run)."""
    if status == "InService":
        return "SUCCESS", "autoscaling InService"
    if status == "Failed":
        return "FAILED", f"HyperPod's autoscaling failed: {message or 'no FailureMessage'}"
    if status is None:
        return "FAILED", "the HyperPod cluster reports no autoscaling (AutoScaling missing from DescribeCluster)"
    if waited_s >= MAX_WAIT_S:
        return "FAILED", f"HyperPod's autoscaling is still {status} after {int(waited_s // 60)} minutes"
    if left_s < POLL_S + MARGIN_S:
        return "CONTINUE", ""
    return "WAIT", ""


def respond(event: Dict[str, Any], status: str, reason: str, physical_id: str) -> None:
    body = json.dumps({
        "Status": status, "Reason": reason[:1000] or status, "PhysicalResourceId": physical_id,
        "StackId": event["StackId"], "RequestId": event["RequestId"], "LogicalResourceId": event["LogicalResourceId"],
        "Data": {},
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",  # noqa: S310 - CloudFormation's URL
                                     headers={"content-type": "", "content-length": str(len(body))})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        print(f"answered CloudFormation {status}: HTTP {response.status}", flush=True)


def _client(service: str) -> Any:
    import boto3

    return boto3.client(service)


def handler(event: Dict[str, Any], context: Any, *, client: Callable[[str], Any] = _client,
            answer: Callable[[Dict[str, Any], str, str, str], None] = respond,
            now: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
    cluster = str(event.get("ResourceProperties", {}).get("ClusterName", ""))
    physical_id = event.get("PhysicalResourceId") or f"{cluster}/autoscaling"
    if event.get("RequestType") == "Delete":
        answer(event, "SUCCESS", "nothing to delete", physical_id)
        return
    started = float(event.get(STARTED) or now())
    try:
        sagemaker = client("sagemaker")
        while True:
            status, message = autoscaling_status(sagemaker, cluster)
            verdict, reason = decide(status, message, waited_s=now() - started,
                                     left_s=context.get_remaining_time_in_millis() / 1000)
            print(f"{cluster}: autoscaling {status}: {verdict} {reason}", flush=True)
            if verdict == "WAIT":
                sleep(POLL_S)
                continue
            if verdict == "CONTINUE":
                client("lambda").invoke(FunctionName=context.invoked_function_arn, InvocationType="Event",
                                        Payload=json.dumps({**event, STARTED: started}).encode())
                return
            answer(event, verdict, reason, physical_id)
            return
    except Exception as exc:  # noqa: BLE001 - CloudFormation must hear of every failure, or it waits an hour
        answer(event, "FAILED", f"{type(exc).__name__}: {exc}", physical_id)

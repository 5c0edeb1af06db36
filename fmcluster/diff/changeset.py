"""The deployed side of a diff: each stack's deployed template, and CloudFormation's own verdict per resource.

For every stack a change set is created from the new template, read (its ``Replacement`` field: True, False or
Conditional, https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_ResourceChange.html), and
deleted whatever happened: it is never executed. Waiting is bounded; a change set that fails or does not finish in
time is an error, never a silent "no changes".
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

Template = Dict[str, Any]
BODY_LIMIT = 51_200  # bytes of TemplateBody CloudFormation accepts; larger templates go through S3
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
_NO_CHANGES = ("didn't contain changes", "No updates are to be performed")


class ChangeSetError(Exception):
    """The deployed comparison could not run; the message says which stack and why."""


@dataclass
class Deployed:
    templates: Dict[str, Template] = field(default_factory=dict)  # stack -> deployed template (absent: not deployed)
    decided: Dict[Tuple[str, str], str] = field(default_factory=dict)  # (stack, logical id) -> Replacement


def _stack_exists(cfn: Any, stack: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        stacks = cfn.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as e:
        if "does not exist" in str(e):
            return False
        raise ChangeSetError(f"{stack}: {e}") from None
    return bool(stacks) and stacks[0].get("StackStatus") != "REVIEW_IN_PROGRESS"


def _template_source(stack: str, body: str, s3: Any, bucket: Optional[str]) -> Dict[str, str]:
    if len(body.encode()) <= BODY_LIMIT:
        return {"TemplateBody": body}
    if s3 is None or not bucket:
        raise ChangeSetError(f"{stack}: the template is over CloudFormation's {BODY_LIMIT}-byte body limit; "
                             "pass --template-bucket BUCKET to stage it in S3")
    key = f"fmcluster-diff/{stack}-{uuid.uuid4().hex}.template.json"
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode(), ServerSideEncryption="aws:kms")
    return {"TemplateURL": f"https://{bucket}.s3.amazonaws.com/{key}"}


def _wait(cfn: Any, stack: str, name: str, timeout_s: float, clock: Callable[[], float],
          sleep: Callable[[float], None]) -> List[Dict[str, Any]]:
    deadline = clock() + timeout_s
    while True:
        described = cfn.describe_change_set(StackName=stack, ChangeSetName=name)
        status, reason = described.get("Status"), described.get("StatusReason", "")
        if status == "CREATE_COMPLETE":
            changes = list(described.get("Changes", []))
            token = described.get("NextToken")
            while token:
                page = cfn.describe_change_set(StackName=stack, ChangeSetName=name, NextToken=token)
                changes += page.get("Changes", [])
                token = page.get("NextToken")
            return changes
        if status == "FAILED":
            if any(s in reason for s in _NO_CHANGES):
                return []
            raise ChangeSetError(f"{stack}: the change set failed: {reason}")
        if clock() >= deadline:
            raise ChangeSetError(f"{stack}: the change set was not ready within {timeout_s:g}s (status {status})")
        sleep(5.0)


def compare_deployed(cfn: Any, templates: Dict[str, Template], *, timeout_s: float = 300.0, s3: Any = None,
                     bucket: Optional[str] = None, clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep) -> Deployed:
    """Each deployed stack's template and the change set's Replacement for each resource it would change."""
    from botocore.exceptions import BotoCoreError, ClientError

    out = Deployed()
    for stack, template in sorted(templates.items()):
        if not _stack_exists(cfn, stack):
            continue  # not deployed: every resource of it is added
        body = cfn.get_template(StackName=stack, TemplateStage="Original")["TemplateBody"]
        out.templates[stack] = json.loads(body) if isinstance(body, str) else dict(body)
        name = f"fmcluster-diff-{uuid.uuid4().hex[:12]}"
        source = _template_source(stack, json.dumps(template), s3, bucket)
        created = False
        try:
            cfn.create_change_set(StackName=stack, ChangeSetName=name, ChangeSetType="UPDATE",
                                  Capabilities=CAPABILITIES, Description="fmcluster diff: never executed", **source)
            created = True
            for change in _wait(cfn, stack, name, timeout_s, clock, sleep):
                rc = change.get("ResourceChange", {})
                if rc.get("LogicalResourceId"):
                    replaced = "True" if rc.get("Action") == "Remove" else rc.get("Replacement", "False")
                    out.decided[(stack, rc["LogicalResourceId"])] = replaced
        except (ClientError, BotoCoreError) as e:
            raise ChangeSetError(f"{stack}: {e}") from None
        finally:
            if created:
                try:
                    cfn.delete_change_set(StackName=stack, ChangeSetName=name)
                except (ClientError, BotoCoreError) as e:
                    raise ChangeSetError(f"{stack}: could not delete change set {name} ({e}); delete it by hand") from None
    return out

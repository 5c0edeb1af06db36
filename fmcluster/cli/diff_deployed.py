"""`fmcluster diff SPEC --deployed`: the spec against the deployed stacks, through change sets never executed."""

from __future__ import annotations

from typing import Any, Dict, Optional

from fmcluster.cli.errors import UsageError


def deployed_report(spec: Any, new: Dict[str, Any], *, timeout_s: float, template_bucket: Optional[str],
                    clients: Any = None) -> Any:
    """`new`: the spec's synthesized templates. `clients`: (cloudformation, s3) for tests; otherwise boto3 clients
    in the spec's region, with bounded calls."""
    from fmcluster.diff import compare
    from fmcluster.diff.changeset import ChangeSetError, compare_deployed

    if timeout_s <= 0:
        raise UsageError(f"--timeout {timeout_s:g}: must be more than 0 seconds")
    if clients is None:
        import boto3
        from botocore.config import Config

        config = Config(connect_timeout=10, read_timeout=30, retries={"max_attempts": 5, "mode": "standard"})
        session = boto3.Session(region_name=spec.region)
        clients = (session.client("cloudformation", config=config), session.client("s3", config=config))
    cfn, s3 = clients
    try:
        deployed = compare_deployed(cfn, new, timeout_s=timeout_s, s3=s3, bucket=template_bucket)
    except Exception as e:  # no credentials, no network, a failed change set: one line and exit 1, not a traceback
        if isinstance(e, ChangeSetError) or type(e).__module__.startswith("botocore"):
            raise ChangeSetError(f"--deployed: {e}") from None
        raise
    return compare(deployed.templates, new, region=spec.region, decided=deployed.decided)

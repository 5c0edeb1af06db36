"""The OnNodeConfigured action every ParallelCluster node runs: fmcluster/runtime/parallelcluster/
on_node_configured.sh, published as its own S3 asset (ParallelCluster downloads a single script object), and the
arguments that tell it the node's role, the runtime asset, the node profile and the collectors' target."""

from __future__ import annotations

import base64
import re
from typing import Any, Dict, List, Optional

from aws_cdk import Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from fmcluster.constructs.node_bootstrap import RUNTIME_DIR, NodeRuntime

SCRIPT = RUNTIME_DIR / "parallelcluster" / "on_node_configured.sh"
ROLES = ("head", "compute")
POLICIES = ("fail", "report")  # settings.POLICIES: drain is refused on ParallelCluster
LEVELS = ("fast", "standard", "deep")
# ParallelCluster passes Args to the script as words: every literal value must be one word.
WORD = re.compile(r"^\S+$")


class OnNodeConfiguredScript(Construct):
    """The script as an S3 asset, and the ``CustomActions.OnNodeConfigured`` sections that run it.

    :param runtime: the node runtime asset the script fetches (its readers need `NodeRuntime.grant_read` too).
    :param region: the region the nodes fetch from.
    :param remote_write_url: the AMP remote-write URL; None: no collectors.
    :param cluster: the ``cluster`` label of the collectors' series.
    :param scrape_interval: seconds between the collectors' scrapes.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        runtime: NodeRuntime,
        region: str,
        remote_write_url: Optional[str] = None,
        cluster: str = "",
        scrape_interval: int = 30,
    ) -> None:
        super().__init__(scope, id)
        if remote_write_url is not None and not cluster:
            raise ValueError("cluster: required with remote_write_url (the collectors label every series with it)")
        if not 10 <= scrape_interval <= 300:
            raise ValueError(f"scrape_interval: {scrape_interval} is not 10-300 seconds")
        for name, value in (("cluster", cluster), ("region", region)):
            if value and not Token.is_unresolved(value) and not WORD.match(value):
                raise ValueError(f"{name}: {value!r} must be one word (ParallelCluster splits Args on spaces)")
        self.asset = s3_assets.Asset(self, "Asset", path=str(SCRIPT))
        self.runtime = runtime
        self.region = region
        self.remote_write_url = remote_write_url
        self.cluster = cluster
        self.scrape_interval = scrape_interval

    @property
    def s3_url(self) -> str:
        return self.asset.s3_object_url

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """s3:GetObject on the script object only (ParallelCluster downloads it with the node's role)."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:GetObject"],
            resource_arns=[f"{self.asset.bucket.bucket_arn}/{self.asset.s3_object_key}"],
        )

    def action(self, *, role: str, node_group: str, profile_json: Optional[str] = None, level: str = "standard",
               policy: str = "fail") -> Dict[str, Any]:
        """A ``CustomActions`` section running the script on a node of `role` (head | compute)."""
        if role not in ROLES:
            raise ValueError(f"role: {role!r} is not one of {', '.join(ROLES)}")
        if not WORD.match(node_group):
            raise ValueError(f"node_group: {node_group!r} must be one word")
        args: List[str] = ["--role", role, "--runtime", self.runtime.s3_url, "--region", self.region]
        if role == "compute":
            if profile_json is None:
                raise ValueError("profile_json: required for compute nodes")
            if level not in LEVELS:
                raise ValueError(f"level: {level!r} is not one of {', '.join(LEVELS)}")
            if policy not in POLICIES:
                raise ValueError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}")
            encoded = base64.b64encode(profile_json.encode()).decode()
            args += ["--profile-b64", encoded, "--level", level, "--policy", policy]
        elif profile_json is not None:
            raise ValueError("profile_json: the head node runs no boot validation")
        if self.remote_write_url is not None:
            args += ["--cluster", self.cluster, "--remote-write-url", self.remote_write_url,
                     "--scrape-interval", str(self.scrape_interval), "--node-group", node_group]
        return {"OnNodeConfigured": {"Script": self.s3_url, "Args": args}}

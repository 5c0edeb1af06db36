"""What both Kubernetes kinds grant around a `serving` section (docs/serving.md): the scalers' read of the AMP
workspace, and the model servers' (or a CSI driver's) read of the models' S3 prefixes, nothing more."""

from __future__ import annotations

from typing import List, Sequence

from aws_cdk import Fn, Stack
from aws_cdk import aws_iam as iam

from fmcluster.nag import acknowledge


def amp_query_statement(workspace_arn: str) -> iam.PolicyStatement:
    """Reading the workspace's metrics (KEDA's Prometheus scaler), nothing else."""
    return iam.PolicyStatement(sid="QueryServingMetrics", resources=[workspace_arn],
                               actions=["aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata"])


def s3_read_statements(stack: Stack, uris: Sequence[str]) -> List[iam.PolicyStatement]:
    """Listing and reading the models' S3 prefixes only (Run:ai Model Streamer lists, then ranges each object)."""
    out = []
    for i, uri in enumerate(sorted(set(uris)), 1):
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        arn = f"arn:{stack.partition}:s3:::{bucket}"
        out.append(iam.PolicyStatement(sid=f"ListModel{i}", actions=["s3:ListBucket"], resources=[arn],
                                       conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}}))
        out.append(iam.PolicyStatement(sid=f"ReadModel{i}", actions=["s3:GetObject"], resources=[f"{arn}/{prefix}*"]))
    return out


def add_model_reads(role: iam.Role, stack: Stack, uris: Sequence[str]) -> None:
    """`s3_read_statements` on `role`, each prefix acknowledged: the objects below a model's prefix are its files."""
    from fmcluster.constructs.bucket_deployment import nag_resource

    for statement in s3_read_statements(stack, uris):
        role.add_to_policy(statement)
    for uri in sorted(set(uris)):
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        arn = nag_resource(stack, f"arn:{stack.partition}:s3:::{bucket}/{prefix}")
        acknowledge(role, f"AwsSolutions-IAM5[Resource::{arn}*]",
                    "A model is every object below its S3 prefix (safetensors shards, config, tokenizer): read-only, "
                    "that prefix only.")


def workspace_url(stack: Stack, workspace_arn: str) -> str:
    """The AMP workspace's Prometheus-compatible base URL (arn:...:workspace/<id>)."""
    return f"https://aps-workspaces.{stack.region}.amazonaws.com/workspaces/{Fn.select(1, Fn.split('/', workspace_arn))}"

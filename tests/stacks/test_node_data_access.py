"""What a cluster's principal may change in the data bucket: read it all, put objects only where S3 feeds a data
repository association, delete only where S3 is the association's only source, and never the checkpoint prefix or the
whole bucket (docs/checkpoints.md, "Who may change the data bucket"). Read from the committed templates of every
example (make test holds them current) and from the spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from helpers import ROOT, actions_of, policy_statements

from fmcluster.registry import load_spec, parse_spec
from fmcluster.spec.data_access import checkpoint_prefix, node_data_access

TEMPLATES = ROOT / "templates"
CHANGES = {"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:AbortMultipartUpload"}


def data_bucket_suffix(resource: Any) -> Optional[str]:
    """`/datasets/*` for {Fn::Join: ['', [{Fn::ImportValue: ...DataBucketArn}, '/datasets/*']]}, else None."""
    if isinstance(resource, dict) and "Fn::Join" in resource:
        parts = resource["Fn::Join"][1]
        if "DataBucketArn" in json.dumps(parts[0]) and len(parts) == 2 and isinstance(parts[1], str):
            return str(parts[1])
    return None


def cluster_templates() -> List[Path]:
    return sorted(p for p in TEMPLATES.glob("*/*-cluster.template.json")
                  if (ROOT / "examples" / f"{p.parent.name}.yaml").exists())


@pytest.mark.parametrize("path", cluster_templates(), ids=lambda p: p.parent.name)
def test_no_principal_may_change_the_whole_bucket_or_remove_checkpoints(path):
    spec = load_spec(ROOT / "examples" / f"{path.parent.name}.yaml")
    checkpoints = checkpoint_prefix(spec)
    template: Dict[str, Any] = json.loads(path.read_text())
    for statement in policy_statements(template):
        changes = CHANGES & set(actions_of(statement))
        resources = statement.get("Resource", [])
        for resource in resources if isinstance(resources, list) else [resources]:
            suffix = data_bucket_suffix(resource)
            if suffix is None or not changes:
                continue
            assert suffix != "/*", f"{statement.get('Sid')}: {sorted(changes)} on the whole data bucket"
            prefix = suffix.strip("/").rstrip("*")
            if checkpoints is not None and {"s3:DeleteObject", "s3:DeleteObjectVersion"} & changes:
                assert not (prefix.startswith(checkpoints) or checkpoints.startswith(prefix)), statement


def test_nodes_stage_datasets_and_leave_exported_checkpoints_to_fsx():
    spec = load_spec(ROOT / "examples" / "default.yaml")  # datasets/ imports; checkpoints/ only exports
    assert checkpoint_prefix(spec) == "checkpoints/"
    access = node_data_access(spec)
    assert access.write == ("datasets/",) and access.delete == ("datasets/",)


def _with_checkpoint_association(**association: Any):
    raw = json.loads(load_spec(ROOT / "examples" / "default.yaml").model_dump_json(exclude_unset=True))
    raw["storage"]["fsx"]["data_repository_associations"][1] = {
        "file_system_path": "/checkpoints", "data_bucket_prefix": "runs/", **association}
    raw["checkpoints"] = {"tier": "fsx", "directory": "/checkpoints/llama", "export_to_s3": bool(association)}
    return parse_spec(raw)


def test_a_checkpoint_prefix_s3_also_feeds_takes_writes_but_never_deletes():
    spec = _with_checkpoint_association(auto_export=["NEW", "CHANGED"])  # imports too (the default)
    assert checkpoint_prefix(spec) == "runs/llama/"
    assert node_data_access(spec).write == ("datasets/", "runs/")
    assert node_data_access(spec).delete == ("datasets/",)


def test_an_import_only_association_over_the_checkpoints_is_still_the_checkpoint_prefix():
    spec = _with_checkpoint_association()  # S3 is its only source: a prefix nodes could delete, but for the checkpoints
    assert checkpoint_prefix(spec) == "runs/llama/" and node_data_access(spec).delete == ("datasets/",)

"""`fmcluster diagram`: the cluster as Graphviz draws it, and a clear exit 1 without dot."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.planner import spec

from fmcluster.planner import diagram
from fmcluster.planner.cli import PlanUsageError, add_diagram_arguments, main, run_diagram
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed (make setup installs it)")


def source(s) -> str:
    return diagram.graph(s).source


def test_graph_holds_groups_domains_fabric_storage_orchestrator_and_observability():
    text = source(load_spec(EXAMPLES / "default.yaml"))
    for part in ("gpu: 2 x p5.48xlarge · 16 H100", "NVLink domain 1: 8 GPUs", "NVLink domain 2", "EFA fabric",
                 "placement group: cluster", "FSx for Lustre PERSISTENT_2",
                 "/fsx/checkpoints → s3://<fm-dev data bucket>/checkpoints/",
                 "s3://<fm-dev data bucket>/datasets/ → /fsx/datasets", "no orchestrator", "Amazon Managed Service",
                 "3200 Gbps/node"):
        assert part in text, part
    assert "Grafana" not in text


def test_orchestrators_and_collapsed_ultraserver_domains():
    assert "SageMaker HyperPod with Slurm" in source(load_spec(EXAMPLES / "hyperpod-slurm-p5.yaml"))
    assert "AWS Parallel Computing Service (Slurm)" in source(load_spec(EXAMPLES / "pcs-p5.yaml"))
    gb = source(spec("p6e-gb200.36xlarge", 36, observability={"grafana": True}))
    assert "NVLink domain 1: 72 GPUs" in gb and "NVLink domain 2: 72 GPUs" in gb and "16 more instances" in gb
    assert "Amazon Managed Grafana" in gb
    big = source(spec("p5.48xlarge", 64))
    assert "62 more NVLink domains" in big and big.count("NVLink domain ") == 2


def test_associations_are_drawn_from_the_bucket_really_linked_to_the_path_nodes_see():
    fsx = {"mount_point": "/lustre", "data_repository_associations": [
        {"file_system_path": "/datasets", "data_bucket_prefix": "datasets/", "auto_export": []},
        {"file_system_path": "/laion", "repository_path": "s3://shared-laion/v2/", "auto_import": [],
         "auto_export": ["NEW"]}]}
    text = source(spec(storage={"fsx": fsx, "data_bucket": {"existing_name": "acme-datasets"}}))
    assert 'label="S3\nacme-datasets"' in text and "plan data bucket" not in text
    assert "s3 -> fsx" in text and "s3://acme-datasets/datasets/ → /lustre/datasets" in text
    assert 'label="S3\nshared-laion"' in text and "/lustre/laion → s3://shared-laion/v2/" in text
    assert "fsx -> s3_shared-laion" in text or 'fsx -> "s3_shared-laion"' in text


@pytest.mark.parametrize("example", sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def test_the_diagram_draws_the_placement_groups_the_committed_templates_create(example):
    import json
    import re

    drawn = re.findall(r"placement group: (\w+)", source(load_spec(EXAMPLES / f"{example}.yaml")))
    created = sum(json.dumps(json.loads(t.read_text())).count('"AWS::EC2::PlacementGroup"')
                  for t in (ROOT / "templates" / example).glob("*.template.json"))
    assert sum(p != "none" for p in drawn) == created, (drawn, created)


@needs_dot
def test_diagram_writes_svg(tmp_path, capsys):
    out = tmp_path / "cluster.svg"
    assert main(["diagram", str(EXAMPLES / "default.yaml"), "--out", str(out)]) == 0
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "EFA fabric" in svg
    assert diagram.svg(load_spec(EXAMPLES / "default.yaml")).startswith("<svg")


def test_dot_source_needs_no_binary(tmp_path):
    out = tmp_path / "cluster.dot"
    assert main(["diagram", str(EXAMPLES / "default.yaml"), "--out", str(out)]) == 0
    mark, source = out.read_text().split("\n", 1)
    assert mark.startswith("// fmcluster-output sha256=") and source.startswith("digraph")  # outputs/marker.py


def test_bad_out_is_a_usage_error(tmp_path):
    p = argparse.ArgumentParser()
    add_diagram_arguments(p)
    with pytest.raises(PlanUsageError, match=r"^--out: cluster.txt needs"):
        run_diagram(p.parse_args([str(EXAMPLES / "default.yaml"), "--out", str(tmp_path / "cluster.txt")]))


def test_without_dot_diagram_exits_1_with_a_clear_message(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))  # nothing on PATH: no dot
    r = subprocess.run([sys.executable, "-m", "fmcluster.planner.cli", "diagram", str(EXAMPLES / "default.yaml"),
                        "--out", str(tmp_path / "c.svg")], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 1, r.stderr
    assert "Graphviz's dot is not installed" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("body, words", [("exec sleep 30", "did not finish within"), ("echo 'Error: syntax' >&2; exit 1",
                                                                                  "dot failed: Error: syntax")])
def test_a_dot_that_hangs_or_fails_is_a_bounded_error(tmp_path, monkeypatch, body, words):
    """Every external command runs under a timeout: a hung or broken dot is an error line, never a hang."""
    from fmcluster.planner import diagram
    from fmcluster.registry import load_spec

    fake = tmp_path / "dot"
    fake.write_text(f"#!/bin/sh\n{body}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setattr(diagram, "DOT_TIMEOUT_S", 0.5)
    with pytest.raises(diagram.DiagramUnavailable, match=words):
        diagram.render(load_spec(ROOT / "examples" / "default.yaml"), "svg")

"""What the docs and the examples' comments say about behaviour is what the code does."""

from __future__ import annotations

import re

from helpers import ROOT

from fmcluster.cli import main
from fmcluster.registry import load_spec


def test_examples_name_the_kubernetes_version_they_set():
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        said = re.findall(r"\(Kubernetes (\d+\.\d+)\)", path.read_text())
        if said:
            spec = load_spec(path)
            assert said == [spec.orchestrator.eks.kubernetes_version], path.name


def test_observability_doc_says_what_job_nccl_does_on_a_kubernetes_spec(capsys):
    assert main(["job", "nccl", str(ROOT / "examples" / "eks-p5.yaml")]) == 0
    written = capsys.readouterr().out
    assert "kind: MPIJob" in written and "kubectl apply --server-side -f" in written
    doc = " ".join((ROOT / "docs" / "observability.md").read_text().split())
    assert "`fmcluster job nccl` on an eks spec writes the ConfigMap and the MPIJob (exit 0)" in doc
    assert "Kubernetes spec exits 2" not in doc

"""`fmcluster job serve` writes the load test and `fmcluster accept` judges its log: the client's documented output
(text block and saved JSON, across releases) read back, each run against its deployment's SLOs and the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fmcluster.acceptance import serve_output
from fmcluster.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "serving"
EKS = "examples/eks-p5en-serving.yaml"


def test_the_log_reads_to_the_json_keys_with_the_deployment_named():
    (run,) = serve_output.parse((FIXTURES / "eks-serve-llama-70b.out").read_text())
    assert run.deployment == "llama-70b" and run.marker["rate"] == "4" and run.source == "json"
    assert (run.get("completed"), run.get("failed"), run.get("request_throughput")) == (1200, 0, 3.9511)
    assert run.get("p99_tpot_ms") == 39.8802 and run.get("mean_ttft_ms") == 423.1812


def test_an_older_release_block_reads_too():
    (run,) = serve_output.parse((FIXTURES / "vllm-bench-serve-older-release.txt").read_text())
    assert run.deployment is None and run.source == "text"
    assert (run.get("total_token_throughput"), run.get("mean_tpot_ms"), run.get("p99_itl_ms")) == (174.8, 6.7, 13.49)
    assert run.get("failed") is None and not run.unread


def test_accept_passes_a_run_within_the_slos(capsys):
    assert main(["accept", str(FIXTURES / "eks-serve-llama-70b.out"), "--spec", EKS, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (run,) = report["runs"]
    assert report["verdict"] == "pass" and run["deployment"] == "llama-70b"
    checks = {c["what"]: c for c in run["checks"]}
    assert checks["mean TPOT (ms)"]["reference"] == 40 and checks["mean TTFT (ms)"]["verdict"] == "pass"
    assert checks["mean TPOT against the plan (ms)"]["reference"] > 0  # the plan's figure at the offered rate
    assert run["percentiles"]["p99_tpot_ms"] == 39.8802


def test_accept_fails_failed_requests_and_warns_a_tpot_over_the_slo(capsys):
    assert main(["accept", str(FIXTURES / "eks-serve-llama-70b-degraded.out"), "--spec", EKS]) == 1
    out = capsys.readouterr().out
    assert "serving llama-70b: FAIL" in out and "12 of 1212 requests failed" in out
    assert "18% over the 40 ms SLO" in out


@pytest.mark.parametrize("argv,needle", [
    (["--spec", "examples/eks-p5.yaml"], "has no serving section"),
    ([], "--spec: a serving load test is judged against the spec's SLOs"),
    (["--spec", EKS, "--model", "nope"], "--model: 'nope' is not a serving model"),
])
def test_bad_input_exits_2(argv, needle, capsys):
    assert main(["accept", str(FIXTURES / "eks-serve-llama-70b.out"), *argv]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("example", [EKS, "examples/hyperpod-eks-p5en-serving.yaml"])
def test_job_serve_writes_the_load_test_with_how_to_run_and_accept_it(example, capsys, tmp_path):
    out = tmp_path / "serve.yaml"
    assert main(["job", "serve", example, "--out", str(out)]) == 0
    text = out.read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    (job,) = [d for d in docs if d["metadata"]["name"].startswith("load-")]
    assert job["kind"] == "Job" and job["spec"]["template"]["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.31.0"
    assert f"fmcluster accept serve-{job['metadata']['labels']['fmcluster.io/model']}.out --spec {example}" in text
    if "hyperpod" in example:
        assert "kubectl -n serving expose deployment" in text
    assert main(["job", "serve", "examples/eks-p5.yaml"]) == 2
    assert "has no serving section" in capsys.readouterr().err

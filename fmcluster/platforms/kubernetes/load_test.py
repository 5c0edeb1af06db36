"""The load test of a served model (`fmcluster job serve`): a batch/v1 Job in the serving namespace running the pinned
benchmark client, `vllm bench serve`, against the deployment's in-cluster endpoint at the spec's request mix and rate
(docs/serving.md, "Load test and acceptance"). Its log holds a marker line naming the deployment, the client's result
block and its saved JSON, which `fmcluster accept` reads against the SLOs and the plan."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# The benchmark client: vLLM's own image, whose `vllm bench serve` prints the result block and saves the JSON that
# fmcluster/acceptance/serve_output.py reads (vllm/benchmarks/serve.py at the tag). v0.31.0 is the vLLM of the Dynamo
# 1.6.2 runtime images AWS publishes (https://aws.github.io/deep-learning-containers/dynamo/), so client and engine
# agree on the OpenAI API they speak.
CLIENT_IMAGE = "vllm/vllm-openai:v0.31.0"
CLIENT_SOURCE = "https://github.com/vllm-project/vllm/blob/v0.31.0/vllm/benchmarks/serve.py"
MARKER = "fmcluster-serve-load-test"
JSON_MARKER = "fmcluster-serve-result-json"
RESULTS = "/results"
# A run long enough for the autoscaler's window and the engines' steady state: five minutes of arrivals at the
# spec's rate, at least 200 requests, at most 20,000.
SECONDS = 300
MIN_PROMPTS, MAX_PROMPTS = 200, 20000


@dataclass(frozen=True)
class ServingEndpoint:
    """Where a kind serves a deployment inside the cluster, and what a person runs first to reach it."""

    url: str  # http://host:port, OpenAI-compatible
    served_name: str  # the model name the server answers to (--served-model-name)
    tokenizer: str  # what the client loads the tokenizer from (the weights' path or URI)
    setup: List[str] = field(default_factory=list)  # commands to run before applying the Job
    volumes: List[Dict[str, Any]] = field(default_factory=list)  # the weights' volume, where the tokenizer is a path
    volume_mounts: List[Dict[str, Any]] = field(default_factory=list)
    node_selector: Dict[str, str] = field(default_factory=dict)
    service_account: Optional[str] = None  # reads an s3:// tokenizer with the serving account's access


def prompts(rate: float) -> int:
    return int(min(MAX_PROMPTS, max(MIN_PROMPTS, round(rate * SECONDS))))


def job(d: Any, namespace: str, endpoint: ServingEndpoint, image: Optional[str] = None) -> Dict[str, Any]:
    """The Job for deployment `d` (a spec `Deployment`)."""
    w, name = d.workload, d.name
    n = prompts(w.requests_per_second)
    bench = [
        "vllm", "bench", "serve", "--backend", "openai", "--base-url", endpoint.url, "--endpoint", "/v1/completions",
        "--model", endpoint.served_name, "--tokenizer", endpoint.tokenizer,
        "--dataset-name", "random", "--random-input-len", str(w.prompt_tokens),
        "--random-output-len", str(w.output_tokens), "--ignore-eos", "--num-prompts", str(n),
        "--request-rate", f"{w.requests_per_second:g}", "--burstiness", "1.0", "--seed", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--goodput", f"ttft:{d.slo.ttft_ms}", f"tpot:{d.slo.tpot_ms}",
        "--ready-check-timeout-sec", "1800",
        "--save-result", "--result-dir", RESULTS, "--result-filename", f"{name}.json",
    ]
    marker = (f"{MARKER} deployment={name} rate={w.requests_per_second:g} prompts={n} "
              f"prompt_tokens={w.prompt_tokens} output_tokens={w.output_tokens} "
              f"ttft_ms={d.slo.ttft_ms} tpot_ms={d.slo.tpot_ms}")
    script = (f"echo {shlex.quote(marker)}; {shlex.join(bench)}; rc=$?; echo {JSON_MARKER}; "
              f"cat {RESULTS}/{name}.json; echo; exit $rc")
    pod: Dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{
            "name": "client", "image": image or CLIENT_IMAGE, "command": ["/bin/sh", "-c", script],
            "resources": {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "8Gi"}},
            "volumeMounts": [{"name": "results", "mountPath": RESULTS}, *endpoint.volume_mounts],
        }],
        "volumes": [{"name": "results", "emptyDir": {}}, *endpoint.volumes],
    }
    if endpoint.node_selector:
        pod["nodeSelector"] = dict(endpoint.node_selector)
    if endpoint.service_account:
        pod["serviceAccountName"] = endpoint.service_account
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"load-{name}", "namespace": namespace,
                     "labels": {"app.kubernetes.io/name": "fmcluster-load-test", "fmcluster.io/model": name}},
        # bounded: the client's ready check (30 minutes) plus the run, well inside two hours
        "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 86400, "activeDeadlineSeconds": 7200, "template": {
            "metadata": {"labels": {"fmcluster.io/model": name}}, "spec": pod}},
    }

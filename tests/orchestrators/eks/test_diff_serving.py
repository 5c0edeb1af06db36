"""`fmcluster diff` on a model served by Dynamo: a model, image or parallelism change names the pools that restart and
whether their capacity drops below min while they roll; replica and scaler changes restart nothing. The manifests are
the kind's own, rendered in-process from the eks serving example (no synthesis)."""

from __future__ import annotations

import copy
from typing import Any, Dict, List

import yaml
from helpers.serving import diff_findings

from fmcluster.diff.findings import CAPACITY, SAFE
from fmcluster.orchestrators.eks import serving as eks_serving
from fmcluster.registry import parse_spec

EXAMPLE = "examples/eks-p5en-serving.yaml"


def _data() -> Dict[str, Any]:
    return yaml.safe_load(open(EXAMPLE))


def _manifest(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    spec = parse_spec(copy.deepcopy(data))
    d = spec.serving.models[0]
    return [eks_serving.graph(spec, d, "serving"), *eks_serving.scalers(spec, d, "serving", workspace_url="https://w")]


def test_an_image_change_rolls_the_worker_and_keeps_min_when_min_is_small():
    old = _manifest(_data())
    new = copy.deepcopy(old)
    worker = next(c for c in new[0]["spec"]["components"] if c["type"] == "worker")
    worker["podTemplate"]["spec"]["containers"][0]["image"] = "public.ecr.aws/example/dynamo:next"
    (f,) = diff_findings(old, new)
    # min 1: 25% unavailable rounds down to 0, so one surge pod starts first
    assert f.cls == SAFE and "pool worker (1 replica(s) at its min) restarts: image" in f.text
    assert "Capacity stays at min" in f.text and "1 extra pod(s) of 1 GPU(s)" in f.text
    assert eks_serving.IMAGES[("vllm", False)] in f.text and f.sources == [
        "https://github.com/ai-dynamo/dynamo/blob/6659a0a2ba391f55da94277ceecebf51b9aff747/docs/pages/kubernetes/"
        "rolling-update.md"]


def test_a_parallelism_change_with_a_larger_min_drops_capacity_below_min():
    data = _data()
    data["serving"]["models"][0]["replicas"] = {"min": 4, "max": 6}
    old = _manifest(data)
    data["serving"]["models"][0]["parallelism"] = {"tensor": 2}
    (f,) = diff_findings(old, _manifest(data))
    assert f.cls == CAPACITY and "restarts: parallelism changed" in f.text
    assert "3 of 4 replicas serve while 1 restart(s)" in f.text


def test_a_model_change_in_a_disaggregated_graph_rolls_both_pools_isolated():
    data = _data()
    m = data["serving"]["models"][0]
    for key in ("parallelism", "replicas"):
        m.pop(key)
    m.update(mode="disaggregated", prefill={"replicas": {"min": 4, "max": 8}}, decode={"replicas": {"min": 1, "max": 2}})
    old = _manifest(data)
    m["source"] = {"fsx": "/models/llama-3.3-70b-instruct-fp8-v2"}
    found = {f.text.split(" (")[0]: f for f in diff_findings(old, _manifest(data))}
    # the operator hashes every worker spec: both pools roll, each in a new Dynamo namespace
    assert set(found) == {"llama-70b: pool prefill", "llama-70b: pool decode"}
    assert found["llama-70b: pool prefill"].cls == CAPACITY and found["llama-70b: pool decode"].cls == SAFE
    assert all("restarts: model changed" in f.text and "exchange requests" not in f.text for f in found.values())


def test_replica_and_scaler_changes_restart_nothing():
    data = _data()
    old = _manifest(data)
    data["serving"]["models"][0]["replicas"] = {"min": 2, "max": 6}
    findings = diff_findings(old, _manifest(data))
    assert [f.cls for f in findings] == [SAFE] and "no worker restarts" in findings[0].text

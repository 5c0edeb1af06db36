"""`fmcluster diff` on a model the HyperPod Inference Operator serves: a model change of a disaggregated model names
both pools, warns that old and new generations may mix (the operator's roll is undocumented) and says the roll
strategy is assumed. The manifest is the kind's own, rendered in-process from the hyperpod-eks serving example."""

from __future__ import annotations

import copy
from typing import Any, Dict, List

import yaml
from helpers.serving import diff_findings

from fmcluster.diff.findings import SAFE
from fmcluster.orchestrators.hyperpod_eks import serving as hp_serving
from fmcluster.registry import parse_spec

EXAMPLE = "examples/hyperpod-eks-p5en-serving.yaml"


def _manifest(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    spec = parse_spec(copy.deepcopy(data))
    return [hp_serving.endpoint_config(spec, spec.serving.models[0], "serving", workspace_url="https://w")]


def test_a_disaggregated_model_change_warns_of_mixed_generations():
    data = yaml.safe_load(open(EXAMPLE))
    old = _manifest(data)
    data["serving"]["models"][0]["source"] = {"s3": "s3://my-models-bucket/llama-3.3-70b-instruct-fp8-v2/"}
    found = {f.text.split(" (")[0]: f for f in diff_findings(old, _manifest(data))}
    assert set(found) == {"llama-70b-pd: pool prefill", "llama-70b-pd: pool decode"}
    prefill = found["llama-70b-pd: pool prefill"]  # min 2: 25% rounds down to 0 unavailable
    assert prefill.cls == SAFE and "model changed" in prefill.text and "exchange requests" in prefill.text
    assert "Kubernetes' default assumed" in prefill.text

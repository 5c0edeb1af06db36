"""What both Kubernetes kinds render for serving, whatever runs it: the EFA list disaggregated workers get is the one
docs/serving.md cites with its source, hugepages share the node's pool, and each serving example's load test is a
valid Job against the endpoint its kind names (through the kind interface)."""

from __future__ import annotations

import copy
import json
import re

import pytest
from platforms.kubernetes.schemas import validate

from fmcluster.platforms.kubernetes import load_test
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.registry import kind_of, load_spec


def test_the_efa_list_is_the_one_docs_serving_md_cites():
    """docs/serving.md's "Disaggregated serving over EFA" names every variable with its value and the guide it comes
    from; the manifests' list is that one."""
    text = open("docs/serving.md").read()
    section = text[text.index("### Disaggregated serving over EFA"):]
    section = section[:section.index("\n### ")]
    documented = dict(re.findall(r"`(FI_[A-Z_]+)=([^`]+)`", section))
    assert documented == common.EFA_ENV
    assert common.EFA_SOURCE in section and "`SGLANG_DISAGGREGATION_NIXL_BACKEND=LIBFABRIC`" in section
    assert json.dumps(common.VLLM_KV_TRANSFER, separators=(",", ":")) in section


def test_hugepages_share_the_node_pool_between_the_workers_it_holds():
    assert [common.hugepages_share(tp, 8) for tp in (1, 2, 4, 8)] == ["1282Mi", "2564Mi", "5120Mi", "5120Mi"]


@pytest.mark.parametrize("name", ["eks-p5en-serving", "hyperpod-eks-p5en-serving"])
def test_the_load_test_job_is_valid_and_targets_the_endpoint(name):
    spec = load_spec(f"examples/{name}.yaml")
    d = spec.serving.models[0]
    endpoint = kind_of(spec).serving_endpoint(spec, d)
    job = load_test.job(d, spec.serving.namespace, endpoint)
    validate(copy.deepcopy(job), spec.orchestrator.eks.kubernetes_version)
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert endpoint.url in script and f"--request-rate {d.workload.requests_per_second:g}" in script
    assert "--save-result" in script and load_test.JSON_MARKER in script and load_test.MARKER in script
    assert job["spec"]["activeDeadlineSeconds"] == 7200

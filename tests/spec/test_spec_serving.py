"""The serving section: each bad combination is refused by field with what would fix it (a model that does not fit its
GPUs, disaggregation without EFA, a kind without Kubernetes, more replicas than the node group's range holds), and
`plan` resolves to the layout the sizing model picks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError
from fmcluster.spec import serving as serving_rules

ADMINS = ["arn:aws:iam::123456789012:role/ml-platform-admin"]
MODEL: Dict[str, Any] = {
    "name": "llama-70b", "architecture": "llama3.3-70b", "source": {"s3": "s3://my-models/llama-3.3-70b-fp8/"},
    "precision": "fp8", "engine": "vllm", "node_group": "h200", "replicas": {"min": 1, "max": 2},
    "slo": {"ttft_ms": 2000, "tpot_ms": 50},
    "workload": {"prompt_tokens": 2000, "output_tokens": 500, "requests_per_second": 4},
}
BASE: Dict[str, Any] = {
    "name": "fm-serve", "region": "us-east-1", "availability_zone": "us-east-1a",
    "orchestrator": {"type": "eks", "eks": {"kubernetes_version": "1.35", "admins": ADMINS}},
    "node_groups": [{"name": "h200", "instance_type": "p5en.48xlarge", "count": 2, "min_count": 0, "max_count": 2}],
    "serving": {"models": [MODEL]},
}


def spec_with(**model: Any) -> Dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["serving"]["models"][0].update(model)
    return data


def problems(data: Any) -> List[str]:
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    return e.value.problems


def test_a_deployment_resolves_plan_to_the_layout_that_fits_and_meets_the_slo():
    spec = parse_spec(BASE)
    d = spec.serving.models[0]
    assert (d.mode, d.parallelism, d.kv, spec.serving.namespace) == ("aggregated", None, "bf16", "serving")
    lay = serving_rules.layout(d, "plan", "p5en.48xlarge")
    assert lay is not None and lay.planned and lay.replica.fits(2500)
    # 70B in FP8 fits one H200 with room for sequences; the pick is the smallest tensor size within the SLOs
    assert lay.tensor == 1 and lay.expert == 1


def test_a_model_that_does_not_fit_its_gpus_is_refused_at_its_tensor_size():
    data = spec_with(architecture="llama3.1-405b", precision="bf16", parallelism={"tensor": 4})
    (problem,) = [p for p in problems(data) if "tensor" in p]
    assert problem.startswith("serving.models[0].parallelism.tensor: llama3.1-405b in bf16 does not fit 4 x H200")
    assert "use more GPUs or fp8 weights" in problem


def test_plan_that_nothing_on_one_node_fits_says_to_span_nodes():
    data = spec_with(architecture="llama3.1-405b", precision="bf16")
    data["node_groups"][0]["instance_type"] = "p5.48xlarge"
    assert any(p.startswith("serving.models[0].parallelism: plan: llama3.1-405b in bf16 does not fit 8 x H100")
               and "pipeline: N" in p for p in problems(data))


def test_disaggregated_needs_efa_on_its_group():
    data = spec_with(mode="disaggregated", replicas=None,
                     prefill={"replicas": {"min": 1, "max": 1}}, decode={"replicas": {"min": 1, "max": 1}})
    data["serving"]["models"][0].pop("replicas")
    assert parse_spec(data).serving.models[0].mode == "disaggregated"
    data["node_groups"][0]["efa"] = False
    (problem,) = problems(data)
    assert problem.startswith("serving.models[0].mode: disaggregated serving moves the KV cache")
    assert "h200 (p5en.48xlarge) has EFA turned off" in problem


@pytest.mark.parametrize("kind", [{"type": "none"}, {"type": "hyperpod-slurm"}])
def test_kinds_without_kubernetes_refuse_the_section(kind):
    data = copy.deepcopy(BASE)
    data["orchestrator"] = kind
    found = problems(data)
    assert any(p.startswith(f"serving: orchestrator {kind['type']} runs no Kubernetes") for p in found), found


def test_replicas_beyond_the_group_range_are_refused_at_the_node_group():
    data = spec_with(replicas={"min": 1, "max": 32}, parallelism={"tensor": 1})
    (problem,) = problems(data)
    assert problem.startswith("serving.models[0].node_group: the deployments on h200 take up to 32 GPUs")


@pytest.mark.parametrize("model,field,needle", [
    ({"parallelism": {"tensor": 3}}, "parallelism.tensor", "within one node"),
    ({"parallelism": {"tensor": 2, "pipeline": 2}}, "parallelism.pipeline", "one whole node"),
    ({"parallelism": {"tensor": 1, "expert": 2}}, "parallelism.expert", "has no experts"),
    ({"node_group": "cpu"}, "node_group", "is not a GPU node group"),
    ({"source": {"fsx": "/models/x"}}, "source.fsx", "needs storage.fsx"),
    ({"source": {"hub": "meta-llama/Llama-3.3-70B-Instruct", "revision": "0" * 40}}, "source.hub",
     "staged once to the shared file system"),
    ({"workload": {"prompt_tokens": 2000, "output_tokens": 500, "requests_per_second": 1, "context": 1000}},
     "workload.context", "is below prompt_tokens + output_tokens"),
    ({"workload": {"prompt_tokens": 2000, "output_tokens": 500, "requests_per_second": 1, "context": 200000}},
     "workload.context", "exceeds llama3.3-70b's 131072-token context"),
])
def test_bad_combinations_name_their_field(model, field, needle):
    found = problems(spec_with(**model))
    assert any(p.startswith(f"serving.models[0].{field}: ") and needle in p for p in found), found


@pytest.mark.parametrize("model,field", [
    ({"architecture": "gpt-5"}, "architecture"),
    ({"source": {"hub": "meta-llama/Llama-3.3-70B-Instruct"}}, "source.revision"),
    ({"source": {"s3": "s3://b/p/", "fsx": "/m"}}, "source.s3"),
    ({"replicas": {"min": 3, "max": 2}}, "replicas.min"),
    ({"prefill": {"replicas": {"min": 1, "max": 1}}}, "prefill"),
    ({"engine": "tgi"}, "engine"),
])
def test_section_shapes_are_refused_by_field(model, field):
    found = problems(spec_with(**model))
    assert any(p.startswith(f"serving.models[0].{field}: ") for p in found), found


def test_names_are_unique():
    data = copy.deepcopy(BASE)
    data["serving"]["models"].append(copy.deepcopy(MODEL))
    assert any(p.startswith("serving.models[1].name: 'llama-70b' names another deployment") for p in problems(data))


def test_cli_validate_exits_2_with_the_field(tmp_path):
    import yaml

    from fmcluster.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec_with(parallelism={"tensor": 3})))
    assert main(["validate", str(path)]) == 2


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_kubernetes_example_can_carry_a_serving_section(path):
    """Issue's promise: a serving section is added to any Kubernetes cluster as it stands (an 8B model streamed from
    S3 on its first GPU group); every other kind refuses it by field."""
    data = yaml.safe_load(path.read_text())
    kind = parse_spec(copy.deepcopy(data)).orchestrator_kind
    if data.get("serving"):
        pytest.skip("carries one already (the serving examples' own tests)")
    group = data["node_groups"][0]
    data["serving"] = {"models": [{
        "name": "small", "architecture": "llama3.1-8b", "source": {"s3": "s3://my-models/llama-3.1-8b/"},
        "engine": "vllm", "node_group": group["name"], "replicas": {"min": 1, "max": 1},
        "parallelism": {"tensor": 1}, "slo": {"ttft_ms": 2000, "tpot_ms": 50},
        "workload": {"prompt_tokens": 1000, "output_tokens": 200, "requests_per_second": 1},
    }]}
    if kind.nodes.agent == serving_rules.KUBERNETES:
        assert parse_spec(data).serving.models[0].node_group == group["name"]
    else:
        assert any(p.startswith(f"serving: orchestrator {kind.name} runs no Kubernetes") for p in problems(data))

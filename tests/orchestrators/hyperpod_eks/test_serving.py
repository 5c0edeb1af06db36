"""Serving on hyperpod-eks, read back from the hyperpod-eks serving example's synthesized template (synthesized once,
through the shared fixture): the InferenceEndpointConfig valid for the operator's CRD, its disaggregated pools with
EFA devices, hugepages and the EFA settings; weights from S3 through the operator; each pool's scaler within its
replicas; the operator's add-on at its pin with its dependency add-ons, its TLS certificates in a bucket of their own
and least-privilege roles; the operator's pods scraped on the engine's port."""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest
from helpers import policy_statements, resources_of
from helpers.serving import applied_objects, assert_efa_worker, assert_serving_scraped, resolve
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.hyperpod_eks import serving as hp_serving
from fmcluster.platforms.kubernetes import metrics
from fmcluster.registry import load_spec

EXAMPLE, STACK = "hyperpod-eks-p5en-serving", "hpeks-serve-cluster"


@pytest.fixture(scope="module")
def template(synth_example) -> Dict[str, Any]:
    return synth_example(EXAMPLE)[STACK]


def _config(template: Dict[str, Any]) -> Dict[str, Any]:
    return next(o for o in applied_objects(template) if o["kind"] == "InferenceEndpointConfig")


def test_every_applied_object_is_valid_for_its_schema(template):
    spec = load_spec(f"examples/{EXAMPLE}.yaml")
    kinds = set()
    for obj in applied_objects(template):
        validate(obj, spec.orchestrator.eks.kubernetes_version)
        kinds.add(obj["kind"])
    assert {"InferenceEndpointConfig", "Namespace", "ServiceAccount"} <= kinds


def test_disaggregated_pools_carry_efa_devices_hugepages_and_the_efa_settings(template):
    iec = _config(template)
    env = {e["name"]: e["value"] for e in iec["spec"]["worker"]["environmentVariables"]}
    for key in ("prefillSpec", "decodingSpec"):
        role = iec["spec"]["pdSpec"][key]
        assert_efa_worker(env, role["resources"])
        # the operator wires the connector (LMCache and NIXL): the roles' arguments leave it to it
        assert "--kv-transfer-config" not in role["args"]


def test_weights_stream_from_s3_through_the_operator_never_the_internet(template):
    iec = _config(template)
    assert iec["spec"]["modelSourceConfig"] == {
        "modelSourceType": "s3", "s3Storage": {"bucketName": "my-models-bucket", "region": "us-east-1"},
        "modelLocation": "llama-3.3-70b-instruct-fp8"}
    args = iec["spec"]["worker"]["args"]
    assert args[args.index("--model") + 1] == hp_serving.MODEL_MOUNT
    assert not any("huggingface.co" in a or a.startswith("hf://") for a in args)


def test_each_pool_scales_on_the_engines_load_within_its_replicas(template):
    scaling = _config(template)["spec"]["pdSpec"]["autoScalingSpec"]
    d = load_spec(f"examples/{EXAMPLE}.yaml").serving.models[0]
    for key, pool in (("prefillAutoScaling", d.prefill), ("decodingAutoScaling", d.decode)):
        assert (scaling[key]["minReplicaCount"], scaling[key]["maxReplicaCount"]) == (pool.replicas.min,
                                                                                      pool.replicas.max)
        assert "vllm:num_requests_waiting" in scaling[key]["prometheusTrigger"]["query"]


def test_the_operator_is_installed_at_its_pin_with_least_privilege(template):
    addons = {r["Properties"]["AddonName"]: r["Properties"] for r in
              resources_of(template, "AWS::EKS::Addon").values()}
    inference = addons[hp_serving.ADDON]
    assert inference["AddonVersion"] == "v1.0.0-eksbuild.1"
    config = json.loads(resolve(inference["ConfigurationValues"]))
    # models are served inside the cluster: the operator's load balancer is off; its KEDA on IRSA
    assert config["alb"] == {"enabled": False} and config["keda"]["auth"]["aws"]["irsa"]["enabled"] is True
    assert {"aws-mountpoint-s3-csi-driver", "metrics-server", "cert-manager"} <= set(addons)
    statements = list(policy_statements(template))
    reads = [s for s in statements if s.get("Sid", "").startswith("ReadModel")]
    assert reads and all(s["Action"] == "s3:GetObject" and "llama-3.3-70b-instruct-fp8/*" in json.dumps(s["Resource"])
                         for s in reads)
    # the operator writes and deletes its TLS certificates in a bucket of their own, never the data bucket
    (tls,) = [s for s in statements if s.get("Sid") == "TlsCertificates"]
    assert "TlsCertificates" in json.dumps(tls["Resource"]) and "DataBucket" not in json.dumps(tls["Resource"])


def test_the_operators_pods_are_scraped_on_the_engine_port(template):
    assert_serving_scraped(template, "hpeks-serve")
    iec = _config(template)
    assert iec["spec"]["worker"]["modelInvocationPort"]["containerPort"] == metrics.ENGINE_PORT
    assert iec["spec"]["metrics"]["modelMetrics"]["port"] == metrics.ENGINE_PORT

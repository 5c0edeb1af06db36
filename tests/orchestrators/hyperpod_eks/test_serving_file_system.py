"""Weights on the shared file system, served by the HyperPod Inference Operator: its model source is the store's
own form for the operator (the mount's `HYPERPOD_INFERENCE` service entry), which FSx for Lustre's mount writes as
the operator's CRD takes it (fsxStorage: file system id, DNS and mount names); the kind reads it off whichever mount
has it, never by the store's name."""

from __future__ import annotations

from typing import Any, Dict

import pytest
import yaml
from helpers import ROOT
from platforms.kubernetes.schemas import validate

from fmcluster.orchestrators.hyperpod_eks import serving as hp_serving
from fmcluster.platforms.storage import HYPERPOD_INFERENCE, Mounts
from fmcluster.platforms.storage.forms import Mount
from fmcluster.platforms.storage.fsx_lustre.mount import lustre_mount
from fmcluster.registry import parse_spec

EXAMPLE = ROOT / "examples" / "hyperpod-eks-p5en-serving.yaml"
FSX = lustre_mount(file_system_id="fs-0123456789abcdef0", dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
                   mount_name="abcdefgh", mount_point="/fsx", efa=False, capacity_gib=4800)
WORKSPACE = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567"
NODES_ONLY = Mount(store="toy", id="Toy", path="/toy", fstype="fuse.toy", source="s3://toy/")


def spec_with(source: Dict[str, Any]) -> Any:
    data = yaml.safe_load(EXAMPLE.read_text())
    data.setdefault("storage", {})["fsx"] = {}
    data["serving"]["models"][0]["source"] = source
    return parse_spec(data)


def model_source(spec: Any, mounts: Mounts) -> Dict[str, Any]:
    config = hp_serving.endpoint_config(spec, spec.serving.models[0], "serving", workspace_url=WORKSPACE,
                                        file_system=hp_serving.file_system_source(mounts))
    validate(config, spec.orchestrator.eks.kubernetes_version)
    return config["spec"]["modelSourceConfig"]


def test_fsx_gives_the_operator_its_file_system_by_id_dns_and_mount_names():
    assert FSX.services[HYPERPOD_INFERENCE] == {"modelSourceType": "fsx", "fsxStorage": {
        "fileSystemId": "fs-0123456789abcdef0", "dnsName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        "mountName": "abcdefgh"}}
    efa = lustre_mount(file_system_id="fs-1", dns_name="d", mount_name="m", mount_point="/fsx", efa=True,
                       capacity_gib=4800)
    assert HYPERPOD_INFERENCE in efa.services, "the operator mounts the file system itself, with or without EFA"


def test_a_model_on_the_file_system_reads_from_the_mount_that_has_the_operators_form():
    mounts = Mounts(mounts=(NODES_ONLY, FSX))
    source = model_source(spec_with({"fsx": "/models/llama-3.3-70b"}), mounts)
    assert source == {"modelSourceType": "fsx", "modelLocation": "models/llama-3.3-70b",
                      "fsxStorage": FSX.services[HYPERPOD_INFERENCE]["fsxStorage"]}
    assert list(source) == ["modelSourceType", "modelLocation", "fsxStorage"], "the order the manifest always had"
    staged = model_source(spec_with({"hub": "meta-llama/Llama-3.3-70B-Instruct", "revision": "0" * 40}), mounts)
    assert staged["modelLocation"] == "models/llama-70b-pd"


def test_without_a_mount_that_gives_the_operator_a_source_the_model_is_refused_by_name():
    with pytest.raises(ValueError, match="serving model llama-70b-pd: its weights are on the shared file system"):
        model_source(spec_with({"fsx": "/models/x"}), Mounts(mounts=(NODES_ONLY,)))

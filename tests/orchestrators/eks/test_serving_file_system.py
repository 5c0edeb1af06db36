"""A model's weights on the shared file system are the store's answer: the source takes the key of the store section
that declares itself the shared file system, and pods, the staging job, the engine's path and the planner read its
claim, mount point and read rate. FSx for Lustre's example renders what it always did; a toy store declared the
shared file system instead changes each of them, with no change outside the test."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, FrozenSet, Optional

import pytest
import yaml
from helpers import ROOT

from fmcluster import registry
from fmcluster.cli.serve_job import staging_job
from fmcluster.orchestrators.eks import serving as eks_serving
from fmcluster.planner.serving.cli import _from_deployment
from fmcluster.planner.serving.plan import plan
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.spec import loading
from fmcluster.spec.base import SpecError
from fmcluster.spec.storage import StoreSettings

EXAMPLE = ROOT / "examples" / "eks-p5en-serving.yaml"
HUB = {"hub": "meta-llama/Llama-3.3-70B-Instruct", "revision": "0" * 40}


class ToyShare(StoreSettings):
    """A toy shared file system: another claim, another mount point, its own read rate."""

    forms: ClassVar[FrozenSet[str]] = frozenset({"boot", "kubernetes"})
    shared_file_system: ClassVar[bool] = True
    title: ClassVar[str] = "Toy share"
    claim: ClassVar[Optional[str]] = "toy-share"
    mount_point: str = "/share"

    def read_bytes_per_s(self) -> Optional[float]:
        return 2e9


def example() -> Dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text())


def toy_spec(data: Dict[str, Any]) -> Any:
    """`data` parsed by a spec model whose shared file system is the toy's section (the registered stores' others
    kept)."""
    sections = [s for s in registry.store_sections() if not s[1].shared_file_system]
    return loading.parse_spec(data, registry.kinds(), [("share", ToyShare, "a toy share"), *sections])


def on_toy_share(source: Dict[str, Any]) -> Dict[str, Any]:
    data = example()
    del data["storage"]["fsx"]
    data["storage"]["share"] = {}
    data["serving"]["models"][0]["source"] = source
    return data


def worker_pod(spec: Any) -> Dict[str, Any]:
    d = spec.serving.models[0]
    workers = [c for c in eks_serving.graph(spec, d, "serving")["spec"]["components"] if c["type"] != "frontend"]
    return workers[0]["podTemplate"]["spec"]


def test_the_fsx_example_mounts_the_claim_and_mount_point_it_always_did():
    spec = registry.load_spec(EXAMPLE)
    d = spec.serving.models[0]
    assert d.source.on_file_system == d.file_system_path() == "/models/llama-3.3-70b-instruct-fp8"
    pod = worker_pod(spec)
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx"}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "fsx", "mountPath": "/fsx", "readOnly": True}]
    args = pod["containers"][0]["args"]
    assert args[args.index("--model") + 1] == "/fsx/models/llama-3.3-70b-instruct-fp8"
    load_test = eks_serving.endpoint(spec, d)
    assert (load_test.volumes, load_test.volume_mounts) == (pod["volumes"], pod["containers"][0]["volumeMounts"])


def test_a_toy_shared_file_system_takes_the_source_key_claim_and_mount_point():
    spec = toy_spec(on_toy_share({"share": "/models/x"}))
    d = spec.serving.models[0]
    assert d.file_system_path() == "/models/x"
    pod = worker_pod(spec)
    assert pod["volumes"] == [{"name": "toy-share", "persistentVolumeClaim": {"claimName": "toy-share"}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "toy-share", "mountPath": "/share", "readOnly": True}]
    assert common.model_path(spec, d) == "/share/models/x"
    with pytest.raises(SpecError, match=r"source\.fsx: unknown key; allowed keys: share, s3, hub, revision"):
        toy_spec(on_toy_share({"fsx": "/models/x"}))


def test_a_hub_model_is_staged_to_the_toy_share_by_its_claim():
    spec = toy_spec(on_toy_share(HUB))
    d = spec.serving.models[0]
    job = staging_job(spec, d, "serving")["spec"]["template"]["spec"]
    assert job["volumes"] == [{"name": "toy-share", "persistentVolumeClaim": {"claimName": "toy-share"}}]
    assert job["containers"][0]["volumeMounts"] == [{"name": "toy-share", "mountPath": "/share"}]
    assert job["containers"][0]["command"][-1].endswith("--local-dir /share/models/llama-70b")


@pytest.mark.parametrize("source,path", [({"share": "/models/x"}, "source.share"), (HUB, "source.hub")])
def test_without_the_section_the_spec_names_the_stores_key(source, path):
    data = on_toy_share(source)
    del data["storage"]["share"]
    with pytest.raises(SpecError) as e:
        toy_spec(data)
    assert any(p.startswith(f"serving.models[0].{path}: needs storage.share: ") for p in e.value.problems), e.value


def test_the_planner_reads_the_weights_at_the_stores_read_rate():
    spec = toy_spec(on_toy_share(HUB))  # a hub model is read from where it is staged
    cold = plan(_from_deployment(spec.serving.models[0], spec))["cold_start"]
    assert cold["from"].startswith("the Toy share file system's throughput")
    assert cold["read_s"] == pytest.approx(cold["weights_gib"] * 2**30 / 2e9, rel=0.01)
    on_s3 = toy_spec(on_toy_share({"s3": "s3://my-models/llama/"}))
    assert plan(_from_deployment(on_s3.serving.models[0], on_s3))["cold_start"]["from"].startswith("S3")

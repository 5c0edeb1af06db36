"""Checkpoint tiers are the stores' answers: a store section that offers a tier adds it to the spec's allowed values
(the schema's enum, the refusal of a bad tier), every kind honours it, and the nvme tier's durable copy follows the
shared file system, whichever store that is. Toy sections here are composed by the spec's composition root as the
registry does (`loading.spec_model` with store sections)."""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Dict, FrozenSet, List, Optional

import pytest
from helpers.parallelcluster import spec_data

from fmcluster import registry
from fmcluster.platforms.storage import PARALLELCLUSTER
from fmcluster.spec import SpecError, loading
from fmcluster.spec.base import Problem
from fmcluster.spec.checkpoints import paths
from fmcluster.spec.data_access import checkpoint_prefix, node_data_access
from fmcluster.spec.storage import BucketLink, StoreSettings

BASE: Dict[str, Any] = {
    "name": "fm-test",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}


class Tape(StoreSettings):
    """A toy store offering a tier of its own, written straight to it (as S3)."""

    forms: ClassVar[FrozenSet[str]] = frozenset({"boot", "parallelcluster"})
    checkpoint_tier: ClassVar[Optional[str]] = "tape"
    checkpoint_summary: ClassVar[str] = "a toy's tape"
    mount_point: str = "/tape"
    fast: bool = False

    def service_problems(self, service: str, at: str) -> List[Problem]:
        return [(f"{at}.fast", "the service cannot mount it fast")] if service == PARALLELCLUSTER and self.fast else []


class ToyFs(StoreSettings):
    """A toy shared file system, linking /checkpoints to the data bucket's runs/ and exporting only that."""

    forms: ClassVar[FrozenSet[str]] = frozenset({"boot"})
    shared_file_system: ClassVar[bool] = True
    checkpoint_tier: ClassVar[Optional[str]] = "toyfs"
    title: ClassVar[str] = "Toy FS"
    mount_point: str = "/toyfs"

    def checkpoint_export(self, directory: str, at: str) -> Optional[str]:
        return None if directory.startswith("/checkpoints") else f"nothing exports {directory}: add {at}.exports"

    def data_bucket_links(self) -> List[BucketLink]:
        return [BucketLink("/checkpoints", "runs/", imports=False, exports=True),
                BucketLink("/datasets", "datasets/", imports=True, exports=False)]


def parse(data: Dict[str, Any], *sections: Any) -> Any:
    return loading.parse_spec(data, registry.kinds(), [*registry.store_sections(), *sections], registry.stores())


def problems(data: Dict[str, Any], *sections: Any) -> List[str]:
    with pytest.raises(SpecError) as e:
        parse(data, *sections)
    return e.value.problems


def spec(storage: Dict[str, Any], **checkpoints: Any) -> Dict[str, Any]:
    return {**copy.deepcopy(BASE), "storage": storage, "checkpoints": checkpoints}


TAPE = ("tape", Tape, "a toy store")


def test_a_store_sections_tier_is_allowed_listed_in_the_schema_and_lands_below_its_mount_point():
    schema = loading.json_schema(loading.spec_model(registry.kinds(), [*registry.store_sections(), TAPE]))
    tier = schema["$defs"]["Checkpoints"]["properties"]["tier"]
    assert tier["enum"] == ["fsx", "nvme", "managed", "s3", "tape"]
    assert tier["description"].endswith(" or tape (a toy's tape).")
    got = paths(parse(spec({"tape": {}}, tier="tape", directory="/runs/a"), TAPE))
    assert (got.tier, got.durable, got.local) == ("tape", "/tape/runs/a", None)
    assert registry.json_schema()["$defs"]["Checkpoints"]["properties"]["tier"]["enum"] == ["fsx", "nvme", "managed",
                                                                                           "s3"]


def test_a_tier_no_store_offers_is_refused_with_the_allowed_ones_and_the_offering_section_is_named():
    (problem,) = problems(spec({}, tier="tape"))
    assert problem.startswith("checkpoints.tier:") and "'fsx', 'nvme', 'managed' or 's3'" in problem
    assert problems(spec({}, tier="tape"), TAPE) == ["checkpoints.tier: tape needs storage.tape: the checkpoints live "
                                                     "on it"]


@pytest.mark.parametrize("kind", ["none", "pcs", "parallelcluster", "hyperpod-slurm"])
def test_every_kind_honours_a_store_tier_and_names_it_among_those_it_takes(kind):
    data = spec({"tape": {}}, tier="tape")
    data["orchestrator"] = {"type": kind}
    assert not [p for p in _problems(data) if p.startswith("checkpoints.tier")]
    data["checkpoints"] = {"tier": "managed", "memory_percent": 20}
    (managed,) = [p for p in problems(data, TAPE) if p.startswith("checkpoints.tier")]
    assert managed.endswith("use fsx, nvme, s3, tape")


def _problems(data: Dict[str, Any]) -> List[str]:
    try:
        parse(data, TAPE)
    except SpecError as e:
        return e.problems
    return []


def test_nvme_keeps_its_durable_copy_on_the_shared_file_system_whichever_store_it_is():
    toy_only = [("toyfs", ToyFs, "a toy file system")]

    def parse_toy(data: Dict[str, Any]) -> Any:
        return loading.parse_spec(data, registry.kinds(), toy_only, ())

    got = paths(parse_toy(spec({"toyfs": {}}, tier="nvme", directory="/checkpoints/run")))
    assert (got.tier, got.durable, got.local) == ("nvme", "/toyfs/checkpoints/run", "/opt/dlami/nvme/checkpoints/run")
    with pytest.raises(SpecError) as e:
        parse_toy(spec({}, tier="nvme"))
    assert e.value.problems == ["checkpoints.tier: nvme needs storage.toyfs: the instance NVMe is lost with its node, "
                                "so a replaced node restores from the copy on Toy FS"]
    data = spec({"toyfs": {}}, tier="nvme", directory="/elsewhere")
    data["node_groups"][0]["instance_type"] = "p6e-gb200.36xlarge"  # no instance store
    with pytest.raises(SpecError) as e:
        parse_toy(data)
    assert [p.split(":")[0] for p in e.value.problems] == ["node_groups[0].instance_type", "checkpoints.export_to_s3"]
    assert e.value.problems[0].endswith("use tier toyfs")
    assert e.value.problems[1] == ("checkpoints.export_to_s3: nothing exports /elsewhere: add storage.toyfs.exports, "
                                   "or set export_to_s3: false")


def test_what_nodes_may_change_in_the_data_bucket_is_read_off_every_stores_links():
    toy = loading.parse_spec(spec({"toyfs": {}}, tier="toyfs", directory="/checkpoints/llama"), registry.kinds(),
                             [("toyfs", ToyFs, "")], ())
    assert checkpoint_prefix(toy) == "runs/llama/"
    access = node_data_access(toy)
    assert (access.write, access.delete) == (("datasets/",), ("datasets/",))


def test_parallelcluster_asks_every_store_section_what_it_cannot_do_when_the_service_mounts_it():
    assert (
        "storage.fsx.efa: ParallelCluster mounts FSx for Lustre itself, over TCP (its SharedStorage section has no "
        "EFA client setting); set storage.fsx.efa: false") in problems(spec_data(storage={"fsx": {"efa": True}}))
    assert "storage.tape.fast: the service cannot mount it fast" in problems(
        spec_data(storage={"tape": {"fast": True}}), TAPE)
    parse(spec_data(storage={"tape": {}}), TAPE)

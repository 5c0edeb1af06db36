"""A spec is read with the model of its own orchestrator kind, which accepts exactly what the model of every kind
accepts for it: a command builds one kind's settings, not six. A spec it refuses is read again by the whole model,
so errors still name the kind that owns a key."""

from __future__ import annotations

import pytest
import yaml
from helpers import ROOT

from fmcluster import registry
from fmcluster.spec import SpecError, loading


def test_a_valid_spec_builds_only_its_own_kinds_model(monkeypatch):
    monkeypatch.setattr(loading, "_models", {})
    spec = registry.load_spec(ROOT / "examples" / "pcs-p5.yaml")
    assert spec.orchestrator_kind.name == "pcs"
    assert [list(model.kinds) for model in loading._models.values()] == [["pcs"]]


def test_a_spec_without_an_orchestrator_is_read_as_the_default_kind(monkeypatch):
    monkeypatch.setattr(loading, "_models", {})
    data = yaml.safe_load((ROOT / "examples" / "default.yaml").read_text())
    data.pop("orchestrator", None)
    spec = registry.parse_spec(data)
    assert spec.orchestrator.type == registry.names()[0]
    assert [list(model.kinds) for model in loading._models.values()] == [[registry.names()[0]]]


@pytest.mark.parametrize("example", ["default", "pcs-p5", "hyperpod-slurm-p5", "eks-p5", "hyperpod-eks-p5",
                                     "parallelcluster-p5"])
def test_the_kinds_own_model_reads_a_spec_as_the_whole_model_does(example):
    data = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text())
    mine = registry.parse_spec(data)
    whole = registry.spec_model().model_validate(data)
    assert len(type(mine).kinds) == 1 and len(type(whole).kinds) == len(registry.kinds())
    assert mine.model_dump() == whole.model_dump()


def test_a_key_of_another_kind_is_still_named_after_its_kind():
    data = yaml.safe_load((ROOT / "examples" / "pcs-p5.yaml").read_text())
    data["orchestrator"]["eks"] = {}
    with pytest.raises(SpecError) as e:
        registry.parse_spec(data)
    assert e.value.problems == ["orchestrator.eks: applies to orchestrator type eks or hyperpod-eks, not pcs"]


def test_an_unknown_kind_lists_every_kind():
    data = yaml.safe_load((ROOT / "examples" / "default.yaml").read_text())
    data["orchestrator"] = {"type": "slurm-on-k8s"}
    with pytest.raises(SpecError) as e:
        registry.parse_spec(data)
    assert e.value.problems == [f"orchestrator.type: 'slurm-on-k8s' is not allowed; allowed: {', '.join(registry.names())}"]

"""The orchestrator seam is real: a kind defined here — settings, rules and a `bind`, nothing else — is accepted by
the spec, bound by the cluster stack, granted storage and AMP access, and synthesized, without a change to any other
file."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import List, Literal

import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct
from helpers import ROOT, group_profile
from pydantic import Field

from fmcluster import registry
from fmcluster.orchestrators.context import Orchestration, OrchestrationContext
from fmcluster.orchestrators.kind import NodeTraits, OrchestratorKind, OrchestratorSettings, StorageTraits
from fmcluster.registry import json_schema, parse_spec
from fmcluster.spec import SpecError
from fmcluster.spec.base import SpecModel


class ToySettings(SpecModel):
    queue: str = Field("main", pattern=r"^[a-z]+$")


class ToyOrchestrator(OrchestratorSettings):
    type: Literal["toy"] = "toy"
    toy: ToySettings = Field(default_factory=ToySettings)


class ToyOrchestration(Construct):
    """A role for the nodes, the shared EC2 node groups, and its queue name in SSM."""

    def __init__(self, scope: Construct, id: str, *, context: OrchestrationContext) -> None:
        super().__init__(scope, id)
        self.role = iam.Role(self, "Nodes", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
        self.node_groups = {g.name: context.node_builder.build(self, g) for g in context.spec.node_groups}
        ssm.StringParameter(self, "Queue", string_value=context.spec.orchestrator.toy.queue)  # type: ignore[attr-defined]

    @property
    def grantee(self) -> iam.IGrantable:
        return self.role


class Toy(OrchestratorKind[ToyOrchestrator]):
    def spec_rules(self, spec) -> List[tuple]:
        return [(f"node_groups[{i}].count", "toy clusters have at most 4 nodes per group")
                for i, g in enumerate(spec.node_groups) if g.count > 4]

    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        toy = ToyOrchestration(scope, "Toy", context=context)
        return Orchestration(toy, toy.grantee, toy.node_groups)


class ToyWithNodesPerJob(Toy):
    def expected_nodes(self, spec) -> dict:
        return {g.name: 0 for g in spec.node_groups}


TOY = Toy(
    name="toy",
    summary="a kind defined in a test",
    settings=ToyOrchestrator,
    nodes=NodeTraits(
        agent="slurm",
        capacity_types=frozenset({"on-demand"}),
    ),
)

SPEC = {
    "name": "toy",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
    "storage": {"fsx": {"storage_capacity_gib": 1200}},
    "orchestrator": {"type": "toy", "toy": {"queue": "train"}},
}


@pytest.fixture
def toy_kind():
    registry.register(TOY)
    yield TOY
    registry.unregister(TOY.name)


def test_an_unregistered_kind_is_refused_with_the_kinds_there_are():
    with pytest.raises(SpecError) as e:
        parse_spec(SPEC)
    assert e.value.problems == [f"orchestrator.type: 'toy' is not allowed; allowed: {', '.join(registry.names())}"]


def test_a_registered_kind_joins_the_spec_with_its_settings_rules_and_capacity(toy_kind):
    spec = parse_spec(SPEC)
    assert spec.orchestrator_kind is toy_kind and toy_kind.settings_of(spec).toy.queue == "train"
    assert "toy" in json.dumps(json_schema())
    with pytest.raises(SpecError) as e:
        parse_spec({**SPEC, "orchestrator": {"type": "toy", "toy": {"queue": "Bad!"}}})
    assert e.value.problems[0].startswith("orchestrator.toy.queue: 'Bad!' is not allowed")
    with pytest.raises(SpecError) as e:
        parse_spec({**SPEC, "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 8,
                                             "capacity": {"type": "odcr", "reservation_id": "cr-0123456789abcdef0"}}]})
    assert set(e.value.problems) == {
        "node_groups[0].capacity.type: orchestrator toy takes on-demand, not odcr",
        "node_groups[0].count: toy clusters have at most 4 nodes per group",
    }


def test_a_registered_kind_synthesizes_with_grants_node_groups_and_its_agent(toy_kind):
    from fmcluster.app import synthesize

    templates = synthesize(parse_spec(SPEC))
    cluster = templates["toy-cluster"]
    types = [r["Type"] for r in cluster["Resources"].values()]
    assert types.count("AWS::EC2::LaunchTemplate") == 1 and types.count("AWS::EC2::PlacementGroup") == 1
    assert "AWS::SSM::Parameter" in types
    policy = json.dumps([r for r in cluster["Resources"].values() if r["Type"] == "AWS::IAM::Policy"])
    assert "aps:RemoteWrite" in policy and "toy-storage-DataBucketArn" in policy
    assert group_profile(cluster, "gpu")["orchestrator"] == "slurm"  # the kind's agent reached the node
    assert {"GpuLaunchTemplateId", "GpuPlacementGroup"} <= set(cluster["Outputs"])


def test_a_kind_says_how_many_nodes_of_each_group_are_expected_up(toy_kind):
    """The inventory alerts expect each group's count unless the kind says fewer run (nodes started per job)."""
    from fmcluster.observability.inventory import ExpectedNodes
    from fmcluster.stacks.observability import expected_nodes

    assert expected_nodes(parse_spec(SPEC)) == [ExpectedNodes("gpu", 2, 8)]
    registry.unregister(TOY.name)
    registry.register(ToyWithNodesPerJob(**{f: getattr(TOY, f) for f in TOY.__dataclass_fields__}))
    assert expected_nodes(parse_spec(SPEC)) == [ExpectedNodes("gpu", 0, 8)]


def _example_of_each_kind() -> List[dict]:
    seen, found = set(), []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        kind = data.get("orchestrator", {}).get("type", "none")
        if kind not in seen:
            seen.add(kind)
            found.append(data)
    return found


@pytest.mark.parametrize("data", _example_of_each_kind(), ids=lambda d: d.get("orchestrator", {}).get("type", "none"))
def test_each_kind_takes_the_validation_policies_it_declares_and_refuses_the_others(data):
    """drain needs Slurm, taint the Kubernetes node gate, fail a provisioning step that a failure stops; a kind says
    which its nodes honour (its default first) and the spec refuses the others by field, never silently reporting."""
    data = {**data, "validation": {}}
    kind = parse_spec(data).orchestrator_kind
    assert parse_spec(data).validation_policy == kind.validation.policies[0]
    for policy in ("fail", "drain", "taint", "report"):
        asked = {**data, "validation": {"policy": policy}}
        if policy in kind.validation.policies:
            assert parse_spec(asked).validation_policy == policy
            continue
        with pytest.raises(SpecError) as e:
            parse_spec(asked)
        assert any(p.startswith(f"validation.policy: {policy} does not apply to orchestrator {kind.name}")
                   and " or ".join(kind.validation.policies) in p for p in e.value.problems), e.value.problems


def test_what_a_failed_validation_may_do_on_each_kind():
    """docs/validation.md's table: the default first."""
    assert {k.name: k.validation.policies for k in registry.kinds()} == {
        "none": ("report", "fail"), "pcs": ("drain", "fail", "report"), "hyperpod-slurm": ("drain", "replace", "fail", "report"),
        "eks": ("taint", "report"), "hyperpod-eks": ("taint", "replace", "fail", "report"), "parallelcluster": ("report", "fail")}


MANAGED = {"checkpoints": {"tier": "managed", "memory_percent": 20}}


def test_a_kind_refuses_the_managed_checkpoint_tier_unless_it_declares_it(toy_kind):
    """Default-deny: a tier a service provides (HyperPod on EKS's managed tiered checkpointing) is refused by every kind
    that does not declare it, a kind defined in a test included; one that declares it takes it."""
    with pytest.raises(SpecError) as e:
        parse_spec({**SPEC, **MANAGED})
    (problem,) = [p for p in e.value.problems if p.startswith("checkpoints.tier")]
    assert problem.startswith("checkpoints.tier: orchestrator toy cannot honour tier managed: managed tiered "
                              "checkpointing is a feature of SageMaker HyperPod clusters orchestrated by Amazon EKS")
    assert problem.endswith("use fsx, nvme, s3")
    registry.unregister(TOY.name)
    registry.register(Toy(**{**{f: getattr(TOY, f) for f in TOY.__dataclass_fields__},
                             "storage": StorageTraits(checkpoint_tiers=frozenset({"fsx", "nvme", "managed"}))}))
    assert parse_spec({**SPEC, **MANAGED}).checkpoints.tier == "managed"


def test_only_hyperpod_on_eks_declares_the_managed_tier():
    assert {k.name for k in registry.kinds() if "managed" in k.storage.checkpoint_tiers} == {"hyperpod-eks"}
    with pytest.raises(ValueError, match="checkpoint_tiers"):
        Toy(**{**{f: getattr(TOY, f) for f in TOY.__dataclass_fields__},
               "storage": StorageTraits(checkpoint_tiers=frozenset({"tape"}))})


class ToyWithNodeUnits(Toy):
    def node_units(self, stack, logical_id, resource, resources):
        from fmcluster.spec.node_units import NodeUnit

        p = resource["Properties"]
        return [NodeUnit(f"{stack}/{logical_id}", stack, logical_id, "toy", p["InstanceType"], p["Count"])]


def test_diff_reads_node_groups_from_each_kinds_own_declaration(toy_kind):
    """`fmcluster diff` names no kind: each kind says which resource types hold its nodes and reads them; a kind
    defined here is read the same way."""
    from fmcluster.diff import groups

    assert {t: [k.name for k in registry.kinds() if t in k.nodes.resource_types] for t in groups.node_types()} == {
        "AWS::EKS::Nodegroup": ["eks"], "AWS::PCS::ComputeNodeGroup": ["pcs"], "Custom::PclusterCluster": ["parallelcluster"],
        "AWS::SageMaker::Cluster": ["hyperpod-slurm", "hyperpod-eks"]}
    assert "AWS::" not in (ROOT / "fmcluster" / "diff" / "groups.py").read_text()
    registry.unregister(TOY.name)
    registry.register(ToyWithNodeUnits(**{**{f: getattr(TOY, f) for f in TOY.__dataclass_fields__},
                                          "nodes": replace(TOY.nodes, resource_types=("Custom::ToyNodes",))}))
    template = {"Resources": {"Nodes": {"Type": "Custom::ToyNodes", "Properties": {"InstanceType": "p5.48xlarge",
                                                                                 "Count": 2}}}}
    (unit,) = groups.units("toy-cluster", template).values()
    assert (unit.service, unit.count, unit.gpus) == ("toy", 2, 16)
    assert "Custom::ToyNodes" in groups.node_types()


def test_a_kinds_settings_have_one_typed_accessor():
    """`OrchestratorSettings.of(spec)` (and the kind's own `settings_of`), not a copy per kind."""
    copies = [str(p.relative_to(ROOT)) for p in (ROOT / "fmcluster" / "orchestrators").rglob("*.py")
              if p.name != "kind.py" and "def settings_of(" in p.read_text()]
    assert copies == []
    from fmcluster.registry import load_spec

    spec = load_spec(ROOT / "examples" / "pcs-p5.yaml")
    pcs = registry.kind_named("pcs")
    assert pcs.settings_of(spec) is pcs.settings.of(spec) is spec.orchestrator
    with pytest.raises(TypeError, match="the spec's orchestrator is pcs, not ToyOrchestrator"):
        ToyOrchestrator.of(spec)

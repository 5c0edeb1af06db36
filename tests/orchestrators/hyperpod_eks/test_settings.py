"""The hyperpod-eks spec section and its rules: every bad input of the issue is refused naming its field (exit 2 from
`fmcluster validate`), and `plan` shows the nodes without a controller and what task governance builds."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml

from fmcluster import registry
from fmcluster.cli import main
from fmcluster.orchestrators.hyperpod_eks.versions import (
    HYPERPOD_KUBERNETES_VERSIONS,
    KUBERNETES_VERSIONS,
    TRAINING_OPERATOR_KUBERNETES_VERSIONS,
)
from fmcluster.platforms.kubernetes.settings import control_plane_zone
from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def base() -> Dict[str, Any]:
    return yaml.safe_load((ROOT / "examples" / "hyperpod-eks-p5.yaml").read_text())


def problems(data: Dict[str, Any]) -> str:
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    return "\n".join(e.value.problems)


def edit(base: Dict[str, Any], section: str, **changes: Any) -> Dict[str, Any]:
    data = copy.deepcopy(base)
    data["orchestrator"].setdefault(section, {}).update(changes)
    return data


def test_the_kind_is_registered_with_its_facts(base):
    kind = registry.kind_named("hyperpod-eks")
    assert kind.nodes.agent == "kubernetes" and kind.nodes.capacity_types == {"on-demand", "training-plan"}
    assert not kind.nodes.in_account and not kind.nodes.image_family and kind.rule_groups == ("hyperpod",)
    spec = parse_spec(base)
    assert control_plane_zone(spec) == spec.second_availability_zone == "us-east-1b"
    assert [(e.role, e.instance_type, e.count) for e in kind.extra_instances(spec)] == [("system", "ml.m5.4xlarge", 2)]


def test_the_kubernetes_version_defaults_to_the_newest_hyperpod_supports(base):
    """1.35 is in no public copy of the HyperPod EKS prerequisites (1.28-1.34 in the newest): the default is the newest
    version both HyperPod and fmcluster's EKS control plane support. The example asks for the training operator, whose
    page lists Kubernetes up to 1.33, so it runs 1.33."""
    data = copy.deepcopy(base)
    del data["orchestrator"]["eks"]["kubernetes_version"]
    assert parse_spec(data).orchestrator.eks.kubernetes_version == "1.34"
    assert base["orchestrator"]["hyperpod"]["training_operator"] is True
    assert parse_spec(base).orchestrator.eks.kubernetes_version == TRAINING_OPERATOR_KUBERNETES_VERSIONS[-1]
    assert "1.35" not in HYPERPOD_KUBERNETES_VERSIONS and KUBERNETES_VERSIONS == ("1.33", "1.34")


@pytest.mark.parametrize("section, changes, path, words", [
    ("eks", {"kubernetes_version": "1.36"}, "orchestrator.eks.kubernetes_version",
     "SageMaker HyperPod on EKS does not support Kubernetes 1.36 (its EKS prerequisites list 1.28, 1.29, 1.30, 1.31, "
     "1.32, 1.33, 1.34); choose one of 1.33, 1.34 (default 1.34)"),
    ("eks", {"kubernetes_version": "1.35"}, "orchestrator.eks.kubernetes_version",
     "SageMaker HyperPod on EKS does not support Kubernetes 1.35"),
    ("eks", {"kubernetes_version": "1.31"}, "orchestrator.eks.kubernetes_version",
     "SageMaker HyperPod supports Kubernetes 1.31, but fmcluster builds only EKS control planes of 1.33, 1.34, 1.35; "
     "choose one of 1.33, 1.34 (default 1.34)"),
    ("eks", {"kubernetes_version": "1.28"}, "orchestrator.eks.kubernetes_version", "choose one of 1.33, 1.34"),
    ("hyperpod", {"controller_instance_type": "ml.m5.12xlarge"}, "orchestrator.hyperpod.controller_instance_type",
     "no Slurm controller"),
    ("hyperpod", {"partitions": ["gpu"]}, "orchestrator.hyperpod.partitions", "applies to orchestrator type hyperpod-slurm"),
    ("hyperpod", {"login_instance_type": "ml.m5.4xlarge"}, "orchestrator.hyperpod.login_instance_type", "login"),
    ("hyperpod", {"system_instance_type": "ml.m5.3xlarge"}, "orchestrator.hyperpod.system_instance_type",
     "not a SageMaker HyperPod instance type"),
    ("hyperpod", {"threads_per_core": 4}, "orchestrator.hyperpod.threads_per_core", "ThreadsPerCore"),
    ("eks", {"admins": ["arn:aws:sts::123456789012:assumed-role/admin/me"]}, "orchestrator.eks.admins",
     "not IAM role or user ARNs"),
    ("eks", {"endpoint": {"public": True}}, "orchestrator.eks.endpoint.public_access_cidrs", "needs the CIDRs"),
    ("eks", {"control_plane_availability_zone": "us-east-1a"}, "orchestrator.eks.control_plane_availability_zone",
     "another AZ"),
    ("eks", {"scheduler": "kueue"}, "orchestrator.eks.scheduler", "unknown key"),
])
def test_bad_settings_name_the_field(base, section, changes, path, words):
    text = problems(edit(base, section, **changes))
    assert path in text and words in text, text


@pytest.mark.parametrize("team, path, words", [
    ({"name": "big", "gpus": {"h100": 40}}, "orchestrator.task_governance.teams[0].gpus.h100",
     "40 GPUs is more than node group h100 has (4 x 8 = 32)"),
    ({"name": "ghost", "gpus": {"a100": 8}}, "orchestrator.task_governance.teams[0].gpus.a100", "no node group 'a100'"),
    ({"name": "Bad_Name", "gpus": {"h100": 8}}, "orchestrator.task_governance.teams[0].name", "lower-case"),
    ({"name": "x", "gpus": {"h100": 0}}, "orchestrator.task_governance.teams[0].gpus", "at least 1"),
    ({"name": "x", "gpus": {"h100": 8}, "sharing": "lend", "borrow_limit_percent": 50},
     "orchestrator.task_governance.teams[0].borrow_limit_percent", "applies with sharing lend-and-borrow"),
])
def test_bad_teams_name_the_field(base, team, path, words):
    data = copy.deepcopy(base)
    data["orchestrator"]["task_governance"]["teams"] = [team]
    text = problems(data)
    assert path in text and words in text, text


def test_a_quota_name_beyond_63_characters_is_refused(base):
    data = copy.deepcopy(base)
    data["name"] = "h" + "p" * 24
    data["orchestrator"]["task_governance"]["teams"] = [{"name": "t" * 40, "gpus": {"h100": 8}}]
    text = problems(data)
    assert "orchestrator.task_governance.teams[0].name" in text and "longer than the 63 characters" in text


def test_team_quotas_above_the_clusters_gpus_are_refused(base):
    data = copy.deepcopy(base)
    data["orchestrator"]["task_governance"]["teams"][1]["gpus"] = {"h100": 24}  # 16 + 24 > 32
    text = problems(data)
    assert "orchestrator.task_governance.teams: the teams' quotas of ml.p5.48xlarge add up to 40 GPUs, the cluster " \
           "has 32" in text


def test_teams_and_priority_classes_are_unique_and_required(base):
    data = copy.deepcopy(base)
    tg = data["orchestrator"]["task_governance"]
    tg["teams"].append(dict(tg["teams"][0]))
    tg["priority_classes"].append({"name": "training", "weight": 1})
    text = problems(data)
    assert "teams[2].name: 'research' is used twice" in text and "priority_classes[3].name" in text
    data["orchestrator"]["task_governance"] = {"teams": []}
    assert "orchestrator.task_governance.teams" in problems(data)
    data["orchestrator"].pop("task_governance")
    assert "orchestrator.task_governance: required" in problems(data)


@pytest.mark.parametrize("capacity", [
    {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"},
    {"type": "odcr", "reservation_id": "cr-0123456789abcdef0"},
])
def test_capacity_hyperpod_does_not_take_is_refused(base, capacity):
    data = copy.deepcopy(base)
    data["node_groups"][0]["capacity"] = capacity
    text = problems(data)
    assert "node_groups[0].capacity.type" in text and "takes on-demand, training-plan" in text


@pytest.mark.parametrize("change, path", [
    ({"validation": {"policy": "drain"}}, "validation.policy"),
    ({"validation": {"level": "deep"}}, "validation.level"),
    ({"network": {"new_vpc": {"cidr": "10.40.0.0/16", "nat_gateway": False}}}, "network.new_vpc.nat_gateway"),
])
def test_what_hyperpod_eks_nodes_cannot_honour(base, change, path):
    assert path in problems({**copy.deepcopy(base), **change})


def test_node_group_rules(base):
    data = copy.deepcopy(base)
    data["node_groups"].append({"name": "system", "instance_type": "c5.18xlarge", "count": 1, "role": "cpu",
                                "ami_id": "ami-0123456789abcdef0", "placement": {"strategy": "cluster"}})
    text = problems(data)
    last = len(data["node_groups"]) - 1
    for path in (f"node_groups[{last}].name", f"node_groups[{last}].ami_id", f"node_groups[{last}].placement"):
        assert path in text, path


def test_policy_defaults_to_taint_and_fail_is_accepted(base):
    data = copy.deepcopy(base)
    data.pop("validation")
    assert parse_spec(data).validation_policy == "taint"
    data["validation"] = {"policy": "fail"}
    assert parse_spec(data).validation_policy == "fail"


def test_cli_validate_exits_2_naming_the_field(tmp_path, capsys, base):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(edit(base, "hyperpod", controller_instance_type="ml.m5.12xlarge")))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "orchestrator.hyperpod.controller_instance_type" in err and "Traceback" not in err


def test_plan_shows_the_nodes_without_a_controller_and_the_governance_objects(capsys):
    assert main(["plan", str(ROOT / "examples" / "hyperpod-eks-p5.yaml")]) == 0
    out = capsys.readouterr().out
    assert ("SageMaker HyperPod on EKS: no controller (the EKS control plane schedules); 4 node(s) in 2 instance "
            "group(s) + 2 x ml.m5.4xlarge system = 6 HyperPod instances") in out
    assert "elastic group prep: HyperPod's Karpenter (AutoScaling, ClusterRole) starts 0 to 4 x ml.c5.18xlarge" in out
    assert "AWS::SageMaker::ClusterSchedulerConfig" in out and "2 team quota(s) (AWS::SageMaker::ComputeQuota)" in out
    assert "team research: 16 of 32 GPUs of ml.p5.48xlarge, lend-and-borrow up to 100%; namespace hyperpod-ns-research, " \
           "queue hyperpod-ns-research-localqueue" in out
    assert "not in CloudFormation: the teams' Kubernetes access" in out
    assert "controller" not in out.split("cost:")[1], "no controller line in the cost either"


def test_the_kubernetes_platforms_default_version_is_one_hyperpod_on_eks_supports():
    """A spec moves between eks and hyperpod-eks without a version change: the platform's default is the newest
    version both support."""
    from fmcluster.orchestrators.hyperpod_eks.versions import HYPERPOD_KUBERNETES_VERSIONS
    from fmcluster.platforms.kubernetes.versions import DEFAULT_KUBERNETES_VERSION, KUBERNETES_VERSIONS, minor

    both = [v for v in KUBERNETES_VERSIONS if v in HYPERPOD_KUBERNETES_VERSIONS]
    assert DEFAULT_KUBERNETES_VERSION == max(both, key=minor) == "1.34"

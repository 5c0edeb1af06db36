"""The alternatives to Kueue: Volcano and KAI Scheduler from their pinned charts, with queues sized from the node
groups and topology over EC2's network labels; their objects valid for their CRDs."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from helpers import resources_of
from platforms.kubernetes.schemas import validate

from fmcluster.app import synthesize
from fmcluster.platforms.kubernetes import gangs
from fmcluster.platforms.kubernetes.versions import CHARTS
from fmcluster.registry import parse_spec

BASE = {
    "name": "eks-alt", "region": "us-east-1", "availability_zone": "us-east-1a",
    "orchestrator": {"type": "eks", "eks": {"admins": ["arn:aws:iam::123456789012:role/a"]}},
    "node_groups": [{"name": "h100", "instance_type": "p5.48xlarge", "count": 2},
                    {"name": "b200", "instance_type": "p6-b200.48xlarge", "count": 2}],
    "observability": {"enabled": False},
}


def spec_with(scheduler):
    data = copy.deepcopy(BASE)
    data["orchestrator"]["eks"]["scheduler"] = scheduler
    return parse_spec(data)


@pytest.fixture(scope="module", params=["volcano", "kai"])
def synthesized(request):
    spec = spec_with(request.param)
    return request.param, spec, synthesize(spec)["eks-alt-cluster"]


def test_the_chosen_scheduler_replaces_kueue(synthesized):
    scheduler, spec, template = synthesized
    charts = {r["Properties"]["Chart"]: r["Properties"] for r in
              resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()}
    name = {"volcano": "volcano", "kai": "kai-scheduler"}[scheduler]
    assert "kueue" not in charts and name in charts
    assert (charts[name]["Repository"], charts[name]["Version"]) == (CHARTS[name].repository, CHARTS[name].version)
    assert charts[name]["Wait"] is True
    manifests = [json.loads(r["Properties"]["Manifest"]) for k, r in
                 resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").items() if "Queues" in k]
    (objects,) = manifests
    for obj in objects:
        validate(obj, spec.orchestrator.eks.kubernetes_version)
    # KubeRay hands Ray's pods to the same scheduler (its chart's batchScheduler.name)
    assert json.loads(charts["kuberay-operator"]["Values"])["batchScheduler"] == {"name": name}


def test_volcano_discovers_hypernodes_from_the_topology_labels():
    spec = spec_with("volcano")
    values = gangs.volcano_values(spec.node_groups, system_selector={"fmcluster.io/node-group": "system"})
    discovery = yaml.safe_load(values["custom"]["controller_config_override"])["networkTopologyDiscovery"]
    (label,) = discovery
    types = label["config"]["networkTopologyTypes"]
    assert set(types) == {"aws3layers", "aws4layers"} and all(len(name) <= 20 for name in types)
    assert types["aws4layers"][-1] == {"nodeLabel": "kubernetes.io/hostname"}
    scheduler = yaml.safe_load(values["custom"]["scheduler_config_override"])
    plugins = [p["name"] for tier in scheduler["tiers"] for p in tier["plugins"]]
    assert "gang" in plugins and "network-topology-aware" in plugins
    (queue,) = gangs.volcano_objects(spec.node_groups)
    assert queue["spec"]["capability"]["nvidia.com/gpu"] == "32" and queue["spec"]["capability"][
        "vpc.amazonaws.com/efa"] == str(2 * 32 + 2 * 8)


def test_kai_queues_and_topologies():
    spec = spec_with("kai")
    objects = gangs.kai_objects(spec.node_groups)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds == [("Topology", "aws-3-layers"), ("Topology", "aws-4-layers"), ("Queue", "training-parent"),
                     ("Queue", "training")]
    queue = objects[-1]["spec"]
    assert queue["parentQueue"] == "training-parent"
    assert queue["resources"]["gpu"]["quota"] == 32 and queue["resources"]["cpu"]["quota"] == 4 * 192 * 1000
    for obj in objects:
        validate(obj, "1.35")


@pytest.mark.parametrize("scheduler, named", [("kueue", "Kueue"), ("volcano", "Volcano"), ("kai", "KAI Scheduler")])
def test_the_diagram_box_names_the_scheduler_chosen_and_no_other(scheduler, named):
    from fmcluster.planner.diagram import graph

    text = graph(spec_with(scheduler)).source
    assert f"Amazon EKS with GPU managed node groups, {named} and a boot-validation node gate" in text
    assert all(other not in text for other in ("Kueue", "Volcano", "KAI") if not named.startswith(other))


def test_wait_for_pods_ready_leaves_room_for_a_first_image_pull_by_default():
    """A 10 GB+ training image pulled for the first time on every node of the job takes minutes; Kueue's 5-minute
    default (and the 10 minutes before) evicted such a first run (docs/eks.md)."""
    from fmcluster.orchestrators.eks.settings import KueueSettings

    assert KueueSettings().wait_for_pods_ready_seconds == 1800

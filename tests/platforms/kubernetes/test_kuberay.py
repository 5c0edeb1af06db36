"""The KubeRay operator on both Kubernetes kinds: its pinned chart, installed by the cluster stack on the system nodes
through Helm (which creates the chart's CRDs itself, so the template carries none of their 4 MB), after the
scheduler that admits Ray's jobs on EKS and before task governance's Kueue webhooks on HyperPod; the values it is
installed with checked offline against the pinned chart's own values.yaml and deployment template (vendored under
charts/, see charts/README.md) and, as Kubernetes fragments, inside a Pod of the cluster's version."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest
import yaml
from helpers import resources_of
from platforms.kubernetes.schemas import validate

from fmcluster.platforms.kubernetes import kuberay
from fmcluster.platforms.kubernetes.versions import CHARTS
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parents[3]
CLUSTER_TEMPLATES = {"eks-p5": "eks-p5-cluster", "eks-p6-b200-capacity-block": "eks-b200-cluster",
                     "hyperpod-eks-p5": "hpeks-p5-cluster", "hyperpod-eks-p5en-training-plan": "hpeks-p5en-cluster"}
# CloudFormation's template body quota from S3 (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/
# cloudformation-limits.html); spec/node_group.py keeps the largest cluster template near three quarters of it
TEMPLATE_LIMIT = 1_000_000


CHART = ROOT / "tests" / "platforms" / "kubernetes" / "charts" / f"kuberay-operator-{CHARTS['kuberay-operator'].version}"


def template(example: str) -> dict:
    return json.loads((ROOT / "templates" / example / f"{CLUSTER_TEMPLATES[example]}.template.json").read_text())


def test_the_chart_is_pinned_to_a_release_with_its_source():
    pin = CHARTS["kuberay-operator"]
    assert (pin.chart, pin.repository, pin.version) == ("kuberay-operator", "https://ray-project.github.io/kuberay-helm/",
                                                       "1.7.0")
    assert "v1.7.0" in pin.source


@pytest.mark.parametrize("example", sorted(CLUSTER_TEMPLATES))
def test_every_kubernetes_cluster_installs_the_operator_on_its_system_nodes(example):
    t = template(example)
    charts = {lid: r for lid, r in resources_of(t, "Custom::AWSCDK-EKS-HelmChart").items()
              if r["Properties"]["Chart"] == "kuberay-operator"}
    ((lid, chart),) = charts.items()
    props = chart["Properties"]
    assert (props["Repository"], props["Version"], props["Namespace"], props["Release"]) == (
        CHARTS["kuberay-operator"].repository, "1.7.0", kuberay.NAMESPACE, kuberay.RELEASE)
    assert json.loads(props["Values"])["nodeSelector"] == {"fmcluster.io/node-group": "system"}
    # the CRDs come from the chart at deploy time: none of their schema is in the template, which stays in quota
    text = json.dumps(t)
    assert "RayJob" not in text and "rayClusterSpec" not in text
    assert len(text) < TEMPLATE_LIMIT * 0.2


def test_on_eks_the_operator_comes_after_the_scheduler_that_admits_its_jobs():
    t = template("eks-p5")
    lid = next(k for k, r in resources_of(t, "Custom::AWSCDK-EKS-HelmChart").items()
               if r["Properties"]["Chart"] == "kuberay-operator")
    kueue = next(k for k, r in resources_of(t, "Custom::AWSCDK-EKS-HelmChart").items()
                 if r["Properties"]["Chart"] == "kueue")
    assert kueue in t["Resources"][lid]["DependsOn"]


def test_on_hyperpod_the_operator_is_in_before_task_governance_webhooks():
    """Task governance's Kueue webhooks fail closed for Deployments outside kube-system and kueue-system
    (docs/hyperpod-eks.md): the operator's Deployment is created before the add-on."""
    t = template("hyperpod-eks-p5")
    lid = next(k for k, r in resources_of(t, "Custom::AWSCDK-EKS-HelmChart").items()
               if r["Properties"]["Chart"] == "kuberay-operator")
    (governance,) = [r for k, r in resources_of(t, "AWS::EKS::Addon").items()
                     if r["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-taskgovernance"]
    assert lid in governance["DependsOn"]


@pytest.mark.parametrize("scheduler, name", [("kueue", None), ("volcano", "volcano"), ("kai", "kai-scheduler")])
def test_the_operator_hands_ray_pods_to_the_clusters_gang_scheduler(scheduler, name):
    values = kuberay.chart_values(system_selector={"fmcluster.io/node-group": "system"}, scheduler=scheduler)
    assert values.get("batchScheduler", {}).get("name") == name
    with pytest.raises(ValueError, match="scheduler"):
        kuberay.chart_values(system_selector={}, scheduler="yunikorn")


def test_the_managed_scraper_collects_every_ray_pod_at_the_port_the_jobs_start_ray_with():
    """Ray's metrics from KubeRay's head and worker pods (PodMonitor-style, by the ray.io/node-type label and the
    container port KubeRay names metrics), labelled with the node and the Ray cluster the dashboard selects."""
    from fmcluster.platforms.kubernetes import metrics

    (ray,) = [j for j in metrics.scrape_config(cluster="c", interval_s=30)["scrape_configs"] if j["job_name"] == "ray"]
    keep = ray["relabel_configs"][0]
    assert keep["action"] == "keep" and keep["regex"] == ".+;metrics"
    assert keep["source_labels"] == ["__meta_kubernetes_pod_label_ray_io_node_type",
                                     "__meta_kubernetes_pod_container_port_name"]
    targets = {r.get("target_label") for r in ray["relabel_configs"]}
    assert {"node", "ray_io_cluster", "cluster"} <= targets
    assert kuberay.start_params(8)["metrics-export-port"] == str(kuberay.METRICS_PORT) == "8080"


def installed_values(example: str) -> dict:
    """The values the cluster stack installs the chart with, read back from the committed template."""
    (chart,) = [r for r in resources_of(template(example), "Custom::AWSCDK-EKS-HelmChart").values()
                if r["Properties"]["Chart"] == "kuberay-operator"]
    return json.loads(chart["Properties"]["Values"])


def unknown_keys(values: Any, defaults: Any, path: Tuple[str, ...] = ()) -> Iterator[str]:
    """Key paths of `values` the chart's values.yaml does not have, or whose type differs from its default's. Below a
    key whose default is empty ({} or []) the contents are the user's own (a node selector, tolerations)."""
    for key, value in values.items():
        where = ".".join(path + (key,))
        if key not in defaults:
            yield f"{where}: not in the chart's values.yaml"
            continue
        default = defaults[key]
        if default not in ({}, [], "", None) and type(value) is not type(default):
            yield f"{where}: {type(value).__name__}, the chart's default is a {type(default).__name__}"
        elif isinstance(default, dict) and default and isinstance(value, dict):
            yield from unknown_keys(value, default, path + (key,))


def test_the_vendored_chart_is_the_pinned_release():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["name"], chart["version"]) == ("kuberay-operator", CHARTS["kuberay-operator"].version)


@pytest.mark.parametrize("example", sorted(CLUSTER_TEMPLATES))
def test_the_installed_values_are_the_charts_own_keys_and_reach_its_deployment(example):
    """No invented key: every value fmcluster sets is a key of the pinned chart's values.yaml, of its type, and its
    deployment template reads it (a misspelt key would be ignored by Helm and the operator land anywhere)."""
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    deployment = (CHART / "deployment.yaml").read_text()
    values = installed_values(example)
    assert list(unknown_keys(values, defaults)) == []
    for key, value in values.items():
        paths = [f".Values.{key}.{k}" for k in value] if key == "batchScheduler" else [f".Values.{key}"]
        for read in paths:
            assert read in deployment, f"{read}: the chart's deployment does not read it"


@pytest.mark.parametrize("scheduler", sorted(kuberay.BATCH_SCHEDULERS))
def test_every_scheduler_choice_gives_values_the_chart_takes(scheduler):
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    values = kuberay.chart_values(system_selector={"fmcluster.io/node-group": "system"}, scheduler=scheduler,
                                  tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])
    assert list(unknown_keys(values, defaults)) == []
    # the names the chart's values.yaml lists for batchScheduler.name
    said = re.search(r"supported values are (.+?), do not set", (CHART / "values.yaml").read_text())
    assert said is not None
    supported = set(re.findall(r'"([a-z-]+)"', said.group(1)))
    assert {"volcano", "kai-scheduler"} <= supported
    assert values.get("batchScheduler", {}).get("name", "volcano") in supported


@pytest.mark.parametrize("example", sorted(CLUSTER_TEMPLATES))
def test_the_installed_values_fragments_are_valid_in_a_pod_of_the_clusters_version(example):
    """The node selector and tolerations end up in the operator's pod: valid there for the spec's Kubernetes version
    (the eks kind's test_objects does this for every chart of the eks examples; here both kinds)."""
    spec = load_spec(ROOT / "examples" / f"{example}.yaml")
    values = installed_values(example)
    pod: dict = {"containers": [{"name": "kuberay-operator", "image": "quay.io/kuberay/operator:v1.7.0"}]}
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName"):
        if key in values:
            pod[key] = values[key]
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kuberay-operator",
                                                             "namespace": kuberay.NAMESPACE}, "spec": pod},
             spec.orchestrator.eks.kubernetes_version)
    assert values["nodeSelector"] == {"fmcluster.io/node-group": "system"}


def test_a_misspelt_value_is_caught():
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert list(unknown_keys({"nodeSelecter": {}}, defaults)) == ["nodeSelecter: not in the chart's values.yaml"]
    assert list(unknown_keys({"batchScheduler": {"nam": "volcano"}}, defaults)) == [
        "batchScheduler.nam: not in the chart's values.yaml"]
    assert list(unknown_keys({"tolerations": {}}, defaults)) == []  # an empty default: the user's own
    assert list(unknown_keys({"replicas": "2"}, defaults)) == ["replicas: str, the chart's default is a int"]

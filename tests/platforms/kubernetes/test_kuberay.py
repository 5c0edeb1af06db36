"""The KubeRay operator on both Kubernetes kinds: its pinned chart, installed by the cluster stack on the system nodes
through Helm (which creates the chart's CRDs itself, so the template carries none of their 4 MB), after the
scheduler that admits Ray's jobs on EKS and before task governance's Kueue webhooks on HyperPod."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import resources_of

from fmcluster.platforms.kubernetes import kuberay
from fmcluster.platforms.kubernetes.versions import CHARTS

ROOT = Path(__file__).resolve().parents[3]
CLUSTER_TEMPLATES = {"eks-p5": "eks-p5-cluster", "eks-p6-b200-capacity-block": "eks-b200-cluster",
                     "hyperpod-eks-p5": "hpeks-p5-cluster", "hyperpod-eks-p5en-training-plan": "hpeks-p5en-cluster"}
# CloudFormation's template body quota from S3 (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/
# cloudformation-limits.html); spec/node_group.py keeps the largest cluster template near three quarters of it
TEMPLATE_LIMIT = 1_000_000


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

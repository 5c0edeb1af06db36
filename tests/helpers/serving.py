"""Reading a serving example's synthesized template back (the manifests the kubectl provider applies, the managed
scraper's configuration) and diffing a model's manifest, for the Kubernetes kinds' serving tests."""

from __future__ import annotations

import json
from typing import Any, Dict, List

from fmcluster.platforms.kubernetes import serving as common
from helpers import resources_of


def resolve(value: Any) -> str:
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(resolve(p) for p in parts)
    text = json.dumps(value)
    if "Workspace" in text:
        return "ws-0123abcd-4567"  # the AMP workspace's id, as the operator's schema takes it
    if "Region" in text:
        return "us-east-1"
    return "resolved"


def applied_objects(template: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every object the kubectl provider applies, CloudFormation references inside strings made plausible values
    before a schema sees them."""
    out: List[Dict[str, Any]] = []
    for r in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").values():
        out += json.loads(resolve(r["Properties"]["Manifest"]))
    return out


def scrape_jobs(template: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    from fmcluster.platforms.kubernetes.scraper import ManagedScraper

    (scraper,) = resources_of(template, "AWS::APS::Scraper").values()
    config = ManagedScraper.decode(scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"])
    return {job["job_name"]: job for job in config["scrape_configs"]}


def assert_serving_scraped(template: Dict[str, Any], cluster: str) -> None:
    """The serving namespace's pods are scraped with the cluster, pod and pool labels rules and scalers select on."""
    jobs = scrape_jobs(template)
    for job in ("serving", "serving-engines"):
        assert jobs[job]["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["serving"]}}]
        relabel = jobs[job]["relabel_configs"]
        assert {"target_label": "cluster", "replacement": cluster} in relabel
        assert {"source_labels": ["__meta_kubernetes_pod_label_fmcluster_io_pool"], "regex": "(.+)",
                "target_label": "pool"} in relabel


def assert_efa_worker(container_env: Dict[str, str], resources: Dict[str, Any]) -> None:
    """A disaggregated worker: the guide's EFA list with its values (tests/platforms/kubernetes/test_serving_efa.py
    holds the list to docs/serving.md and its source), EFA devices, and hugepages that let as many of these pods as
    the node's GPUs hold fit its EFA driver's pool (5128 pages of 2 MiB), each at most the guide's 5120Mi."""
    from fmcluster.platforms.kubernetes import allocatable

    assert {k: container_env.get(k) for k in common.EFA_ENV} == common.EFA_ENV
    gpus, efa = int(resources["limits"]["nvidia.com/gpu"]), int(resources["limits"]["vpc.amazonaws.com/efa"])
    assert efa >= 1 and resources["requests"] == resources["limits"]
    hugepages = int(resources["limits"]["hugepages-2Mi"][:-2])
    assert hugepages <= 5120 and (8 // gpus) * hugepages <= allocatable.EFA_HUGEPAGES_2MI // 2**20


def diff_findings(old: List[Dict[str, Any]], new: List[Dict[str, Any]]) -> List[Any]:
    """`fmcluster diff`'s findings on one model manifest (old docs -> new docs) inside a one-resource template."""
    from fmcluster.diff import compare

    def template(docs: List[Dict[str, Any]]) -> Dict[str, Any]:
        return {"s": {"Resources": {"ModelLlama": {"Type": "Custom::AWSCDK-EKS-KubernetesResource",
                                                   "Properties": {"Manifest": json.dumps(docs)}}}}}

    return [f for f in compare(template(old), template(new)).findings if f.where == "s/ModelLlama"]

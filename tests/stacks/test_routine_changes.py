"""Routine changes never touch running nodes: a new fmcluster runtime together with new validation, alert and collector
settings leaves every launch template, EKS node group, PCS compute node group, HyperPod instance group and
ParallelCluster queue exactly as it was. Nodes learn what changed from their group's boot pointer (or, on HyperPod and
ParallelCluster, the objects their lifecycle script or custom action reads) when they boot; docs/changes.md.

One synth per kind for the changed variant; the unchanged side is the session's synth of the example."""

from __future__ import annotations

import json
import shutil
from typing import Any, Dict, List, Tuple

import pytest
import yaml
from helpers import ROOT, resources_of
from helpers.parallelcluster import configuration

from fmcluster.app import synthesize
from fmcluster.constructs import node_bootstrap
from fmcluster.constructs.node_bootstrap import POINTERS_METADATA
from fmcluster.registry import parse_spec

EXAMPLES = ROOT / "examples"


# one example per orchestrator kind
KINDS = {
    "none": ("default", "fm-dev-cluster"),
    "pcs": ("pcs-p5", "pcs-p5-cluster"),
    "eks": ("eks-p5", "eks-p5-cluster"),
    "hyperpod-slurm": ("hyperpod-slurm-p5", "hp-p5-cluster"),
    "hyperpod-eks": ("hyperpod-eks-p5", "hpeks-p5-cluster"),
    "parallelcluster": ("parallelcluster-p5", "pc-p5-cluster"),
}
NODE_TYPES = ("AWS::EC2::LaunchTemplate", "AWS::EKS::Nodegroup", "AWS::PCS::ComputeNodeGroup",
              "AWS::EC2::PlacementGroup")


def routine_change(data: Dict[str, Any]) -> Dict[str, Any]:
    """The spec edits of a routine week: another validation level, a version floor and a skipped check (thresholds),
    another alert address, a different collector scrape interval."""
    validation = data.setdefault("validation", {})
    validation["level"] = "fast" if validation.get("level", "standard") != "fast" else "standard"
    validation["min_versions"] = {**validation.get("min_versions", {}), "driver": "550.54.15"}
    validation["skip_checks"] = [*validation.get("skip_checks", []), "hw.mig"]
    observability = data.setdefault("observability", {})
    observability["alert_emails"] = [*observability.get("alert_emails", []), "oncall-2@example.com"]
    observability["scrape_interval_seconds"] = 60
    return data


@pytest.fixture(scope="module")
def upgraded_runtime(tmp_path_factory):
    """fmcluster's runtime with one node-side file changed, as every release changes it."""
    copy = tmp_path_factory.mktemp("release") / "runtime"
    shutil.copytree(node_bootstrap.RUNTIME_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    validator = copy / "validate.py"
    validator.write_text(validator.read_text() + "\n# a later fmcluster release\n")
    return copy


@pytest.fixture(scope="module")
def changed(upgraded_runtime):
    """kind -> the example's cluster template after the runtime upgrade and the routine spec edits (synthesized once
    per kind, on first use)."""
    cache: Dict[str, Dict[str, Any]] = {}

    def get(kind: str) -> Dict[str, Any]:
        if kind not in cache:
            example, stack = KINDS[kind]
            spec = parse_spec(routine_change(yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())))
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(node_bootstrap, "RUNTIME_DIR", upgraded_runtime)
                cache[kind] = synthesize(spec)[stack]
        return cache[kind]

    return get


def node_resources(template: Dict[str, Any]) -> Dict[Tuple[str, str], Any]:
    """Everything that decides which instances run and how they boot: launch templates, EKS node groups, PCS compute
    node groups, placement groups (whole resources, DependsOn included), HyperPod instance groups, ParallelCluster
    queues."""
    found: Dict[Tuple[str, str], Any] = {}
    for type_ in NODE_TYPES:
        found.update({(type_, k): v for k, v in resources_of(template, type_).items()})
    for k, v in resources_of(template, "AWS::SageMaker::Cluster").items():
        found[("InstanceGroups", k)] = v["Properties"]["InstanceGroups"]
    if resources_of(template, "Custom::PclusterCluster"):
        found[("SlurmQueues", "Scheduling")] = configuration(template)["Scheduling"]
    return found


def pointers(template: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [v["Metadata"][POINTERS_METADATA] for v in resources_of(template, "Custom::CDKBucketDeployment").values()
            if POINTERS_METADATA in v.get("Metadata", {})]


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_runtime_upgrade_and_new_validation_settings_leave_every_node_group_unchanged(synth_example, changed, kind):
    example, stack = KINDS[kind]
    before, after = synth_example(example)[stack], changed(kind)
    old, new = node_resources(before), node_resources(after)
    assert old, f"{kind}: no node resources found; the comparison would prove nothing"
    assert old.keys() == new.keys()
    differing = sorted(f"{t} {k}" for (t, k) in old if json.dumps(old[(t, k)], sort_keys=True)
                       != json.dumps(new[(t, k)], sort_keys=True))
    assert not differing, f"{kind}: a routine change would reach running nodes through {differing}"
    # the change did happen: the templates differ, in what nodes read when they boot
    assert json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True)


@pytest.mark.parametrize("kind", ["none", "pcs", "eks"])
def test_new_nodes_learn_the_change_from_their_group_pointer(synth_example, changed, kind):
    """Launch-template kinds: the pointer names the new runtime (by its sha256) and the new level and profile."""
    example, stack = KINDS[kind]
    (old,), (new,) = pointers(synth_example(example)[stack]), pointers(changed(kind))
    assert old.keys() == new.keys() and any(k.startswith("boot/groups/") for k in new)
    for key in new:
        assert new[key]["runtime"]["sha256"] != old[key]["runtime"]["sha256"]
        assert new[key]["runtime"]["key"] == f"runtime/{new[key]['runtime']['sha256']}.zip"
        assert new[key]["level"] != old[key]["level"]
        if new[key].get("profile") is not None:  # the login node has none
            assert "hw.mig" in new[key]["profile"]["disabled_checks"]


def test_parallelcluster_nodes_learn_the_change_from_the_published_objects(synth_example, changed):
    """The queues name stable keys; settings.json names the new runtime and the head node's revision moves, so an
    update runs its OnNodeUpdated (docs/parallelcluster.md, "Updates")."""
    old, new = (configuration(t) for t in (synth_example("parallelcluster-p5")["pc-p5-cluster"],
                                           changed("parallelcluster")))
    args = old["HeadNode"]["CustomActions"]["OnNodeUpdated"]["Args"]
    assert args != new["HeadNode"]["CustomActions"]["OnNodeUpdated"]["Args"]
    for queue in new["Scheduling"]["SlurmQueues"]:
        assert "--level" not in queue["CustomActions"]["OnNodeConfigured"]["Args"]


def lifecycle_deployments(template: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The HyperPod lifecycle bucket's deployments by key prefix: entries, pointers, runtime objects."""
    return {d["Properties"]["DestinationBucketKeyPrefix"]: d["Properties"]
            for d in resources_of(template, "Custom::CDKBucketDeployment").values()
            if d["Properties"]["DestinationBucketKeyPrefix"] in ("lifecycle/", "boot/groups/", "runtime/")}


@pytest.mark.parametrize("kind", ["hyperpod-slurm", "hyperpod-eks"])
def test_hyperpod_nodes_learn_the_change_from_their_group_pointer_behind_a_fixed_entry(synth_example, changed, kind):
    """The whole HyperPod cluster resource stays identical (LifeCycleConfig is part of each instance group), and so do
    the entries under SourceS3Uri it names; the change is a new runtime object and rewritten pointers
    (docs/changes.md, "Routine changes")."""
    example, stack = KINDS[kind]
    before, after = synth_example(example)[stack], changed(kind)
    old, new = (resources_of(t, "AWS::SageMaker::Cluster") for t in (before, after))
    assert old and json.dumps(old, sort_keys=True) == json.dumps(new, sort_keys=True)
    old_objects, new_objects = lifecycle_deployments(before), lifecycle_deployments(after)
    assert old_objects.keys() == new_objects.keys() == {"lifecycle/", "boot/groups/", "runtime/"}
    assert old_objects["lifecycle/"]["SourceObjectKeys"] == new_objects["lifecycle/"]["SourceObjectKeys"]
    for prefix in ("boot/groups/", "runtime/"):
        assert old_objects[prefix]["SourceObjectKeys"] != new_objects[prefix]["SourceObjectKeys"], prefix
        assert new_objects[prefix]["Prune"] is False, f"{prefix}: older objects stay for nodes that may still read them"
    # what the pointers say, as `fmcluster diff` reads it: the new runtime by its sha256, the new level and profile
    (old_pointers,), (new_pointers,) = pointers(before), pointers(after)
    assert old_pointers.keys() == new_pointers.keys() and all(k.startswith("boot/groups/") for k in new_pointers)
    for key, pointer in new_pointers.items():
        assert pointer["runtime"]["key"] == f"runtime/{pointer['runtime']['sha256']}.zip"
        assert pointer["runtime"] != old_pointers[key]["runtime"] and pointer["level"] != old_pointers[key]["level"]

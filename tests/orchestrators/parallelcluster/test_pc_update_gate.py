"""The update gate: once a cluster exists, every later `cdk deploy` is an update of
`Custom::PclusterCluster`, which ParallelCluster's own update checker (ConfigPatch) accepts or refuses. A new
fmcluster runtime, or a change of the node collectors' settings, must be an update ParallelCluster accepts on a
running cluster without touching the compute fleet. ParallelCluster's checker runs offline in .venv-pcluster
(scripts/pcluster_update_check.py) on two renders of the example."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from helpers.parallelcluster import ROOT, configuration, pcluster_update_check, with_placeholders

from fmcluster.app import synthesize
from fmcluster.constructs import node_bootstrap
from fmcluster.orchestrators.parallelcluster.settings import cluster_name
from fmcluster.registry import parse_spec
from fmcluster.spec import ClusterSpec

P5 = ROOT / "examples" / "parallelcluster-p5.yaml"


def _spec(**changes: Any) -> ClusterSpec:
    data = yaml.safe_load(P5.read_text())
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return parse_spec(data)


def _render(spec: ClusterSpec) -> Dict[str, Any]:
    """The configuration as the provider receives it, references replaced by placeholders that keep differences."""
    return with_placeholders(configuration(synthesize(spec)[spec.stack_name("cluster")]), distinct=True)


@pytest.fixture(scope="module")
def base() -> Dict[str, Any]:
    return _render(_spec())


@pytest.fixture(scope="module")
def upgraded_runtime(tmp_path_factory) -> Dict[str, Any]:
    """The same example with the node runtime's contents changed (as every fmcluster release changes them)."""
    copy = tmp_path_factory.mktemp("upgrade") / "runtime"
    shutil.copytree(node_bootstrap.RUNTIME_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    contract = copy / "contract.py"
    contract.write_text(contract.read_text() + "\n# a later fmcluster release\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(node_bootstrap, "RUNTIME_DIR", copy)
        return _render(_spec())


def _assert_accepted_without_touching_compute(code: int, report: Dict[str, Any]) -> None:
    assert code == 0 and report["allowed"], [c for c in report["changes"] if c["check"] != "SUCCEEDED"]
    assert report["changes"], "no change at all: the head node would never see the new runtime"
    assert {c["policy"] for c in report["changes"]} == {"SUPPORTED"}, report["changes"]
    assert not [c for c in report["changes"] if c["path"][:1] == ["Scheduling"]], "the compute fleet would be replaced"
    assert set(report["blocked_aws_calls"]) <= {"ec2.DescribeCapacityReservations"}


def test_a_new_runtime_is_an_update_parallelcluster_accepts_without_replacing_compute_nodes(
        base, upgraded_runtime, pcluster_python, tmp_path):
    code, report = pcluster_update_check(pcluster_python, base, upgraded_runtime, "pc-p5", tmp_path)
    _assert_accepted_without_touching_compute(code, report)
    (change,) = report["changes"]  # only the head node's OnNodeUpdated revision: it refreshes the head node
    assert change["path"] == ["HeadNode", "CustomActions", "OnNodeUpdated"] and change["parameter"] == "Args"


@pytest.mark.parametrize("changes", [
    {"observability__scrape_interval_seconds": 60},
    {"observability__enabled": False},
])
def test_collector_settings_are_updates_parallelcluster_accepts(base, changes, pcluster_python, tmp_path):
    spec = _spec(**changes)
    code, report = pcluster_update_check(pcluster_python, base, _render(spec), cluster_name(spec), tmp_path)
    _assert_accepted_without_touching_compute(code, report)


def test_the_gate_refuses_what_parallelcluster_refuses(base, pcluster_python, tmp_path: Path):
    """The head node's root volume cannot change on a running cluster (UNSUPPORTED): the gate says so."""
    target = _render(_spec(orchestrator__parallelcluster__head_node_root_volume_gib=300))
    code, report = pcluster_update_check(pcluster_python, base, target, "pc-p5", tmp_path)
    assert code == 1 and not report["allowed"]
    assert [(c["parameter"], c["policy"]) for c in report["changes"]] == [("Size", "UNSUPPORTED")]


def test_a_cluster_created_before_the_head_node_timeout_takes_it_in_an_update(base, pcluster_python, tmp_path):
    """Clusters created without DevSettings get the head node's bootstrap timeout at their next deploy: adding the
    section is an update ParallelCluster accepts; changing the value later is not (its policy is UNSUPPORTED)."""
    before = {k: v for k, v in base.items() if k != "DevSettings"}
    code, report = pcluster_update_check(pcluster_python, before, base, "pc-p5", tmp_path)
    _assert_accepted_without_touching_compute(code, report)
    changed = {**base, "DevSettings": {"Timeouts": {"HeadNodeBootstrapTimeout": 3300}}}
    code, report = pcluster_update_check(pcluster_python, base, changed, "pc-p5", tmp_path)
    assert code == 1 and [c["policy"] for c in report["changes"]] == ["UNSUPPORTED"]


def test_gpu_queues_allocate_whole_nodes_and_a_running_cluster_takes_it_in_an_update(base, pcluster_python, tmp_path):
    """JobExclusiveAllocation on every GPU queue (OverSubscribe=EXCLUSIVE: no second job on a node's GPUs and EFA
    interfaces), not on CPU queues; a cluster created without it takes it in an update ParallelCluster's own checker
    accepts (SUPPORTED) with the fleet running."""
    queues = {q["Name"]: q for q in base["Scheduling"]["SlurmQueues"]}
    assert queues["h100"]["JobExclusiveAllocation"] is True and "JobExclusiveAllocation" not in queues["prep"]
    before = copy.deepcopy(base)
    for q in before["Scheduling"]["SlurmQueues"]:
        q.pop("JobExclusiveAllocation", None)
    code, report = pcluster_update_check(pcluster_python, before, base, "pc-p5", tmp_path)
    assert code == 0 and report["allowed"], report["changes"]
    assert [(c["parameter"], c["policy"]) for c in report["changes"]] == [("JobExclusiveAllocation", "SUPPORTED")]

"""Slurm's health check on ParallelCluster: off by default; switched on, the cluster's CustomSlurmSettings name the
shared shim (ParallelCluster's own Prolog, with its health check manager, stays as it is) and ParallelCluster's own
schema and deny list take it."""

from __future__ import annotations

import pytest
from helpers.parallelcluster import make_spec, pcluster_validate

from fmcluster.orchestrators.parallelcluster.config import HEALTH_CHECK_SHIM, ClusterInputs, cluster_configuration
from fmcluster.spec import SpecError

INPUTS = ClusterInputs(subnet_id="subnet-0123456789abcdef0", security_group_id="sg-0123456789abcdef0",
                       head_node_policy_arn="arn:aws:iam::123456789012:policy/parallelcluster-h",
                       compute_policy_arn="arn:aws:iam::123456789012:policy/parallelcluster-c",
                       placement_groups={"gpu": "pg-gpu"})


def slurm_settings(settings=None):
    return cluster_configuration(make_spec(settings), INPUTS)["Scheduling"]["SlurmSettings"]


def test_off_by_default():
    assert "CustomSlurmSettings" not in slurm_settings()


def test_switched_on_slurm_runs_the_shim_on_every_node_cycling_through_the_interval():
    s = slurm_settings({"health_check": True, "health_check_interval_seconds": 600})
    assert s["CustomSlurmSettings"] == [{"HealthCheckProgram": HEALTH_CHECK_SHIM}, {"HealthCheckInterval": "600"},
                                        {"HealthCheckNodeState": "ANY,CYCLE"}]
    assert not any(k.lower() in ("prolog", "epilog") for d in s["CustomSlurmSettings"] for k in d)


def test_an_interval_below_a_minute_is_refused_at_its_field():
    with pytest.raises(SpecError) as e:
        make_spec({"health_check": True, "health_check_interval_seconds": 30})
    assert any(p.startswith("orchestrator.parallelcluster.health_check_interval_seconds") for p in e.value.problems)


def test_parallelclusters_own_validators_accept_the_settings(pcluster_python, tmp_path):
    config = cluster_configuration(make_spec({"health_check": True}), INPUTS)
    code, report = pcluster_validate(pcluster_python, config, "pc-health", tmp_path)
    assert code == 0 and report["valid"], report
